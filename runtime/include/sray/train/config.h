#pragma once

// What a training run asks for: how many workers and what each holds
// (ScalingConfig), where results go and how failures are handled
// (RunConfig), and how the workers' process group behaves (TorchConfig).
// Plain values; copy them freely.

#include <chrono>
#include <cstddef>
#include <map>
#include <string>

#include "sray/placement_group.h"

namespace sray::train {

// Every metric a worker reports: name -> value.
using Metrics = std::map<std::string, double>;

struct ScalingConfig {
  int num_workers = 1;
  // Each worker takes one GPU (unless resources_per_worker names another
  // amount), gets CUDA_VISIBLE_DEVICES for it, and the group uses NCCL.
  bool use_gpu = false;
  // Held by each worker for the whole run; empty: {"CPU": 1}, plus
  // {"GPU": 1} with use_gpu.
  std::map<std::string, double> resources_per_worker;
  // kPack fills few nodes first; kSpread puts workers on as many nodes as it can.
  PlacementStrategy placement_strategy = PlacementStrategy::kPack;
};

struct FailureConfig {
  // Group restarts allowed after a worker failed: 0 none, -1 unlimited.
  int max_failures = 0;
};

struct CheckpointConfig {
  // Checkpoints kept in storage: 0 keeps all. The latest is always kept,
  // since a restart resumes from it.
  int num_to_keep = 0;
  // A reported metric ranking checkpoints for pruning; empty: by age.
  std::string score_attribute;
  std::string score_order = "max";  // "max" or "min"
};

struct RunConfig {
  // The run's directory is storage_path/name. Default name:
  // "TorchTrainer_<date>_<time>"; default storage_path: "train" in the session
  // directory of the driver's node (removed when the step ends: give a path
  // to keep checkpoints and metrics after the job).
  std::string name;
  std::string storage_path;
  FailureConfig failure_config;
  CheckpointConfig checkpoint_config;
  // One progress line per report on the driver's standard output.
  bool verbose = true;
};

struct TorchConfig {
  // A collective waiting longer than this for a peer fails (Gloo's default
  // is 30 minutes). Worker deaths are noticed by the trainer within
  // seconds in any case; this bounds a hung peer that is still alive.
  std::chrono::milliseconds timeout = std::chrono::minutes(5);
  // Gradient buckets, as DDP: the first one small so that communication
  // starts early in the backward pass.
  std::size_t bucket_bytes = 25U << 20U;
  std::size_t first_bucket_bytes = 1U << 20U;
  // Rank 0's buffers (BatchNorm's running statistics, ...) go to every
  // worker at each backward pass, so that every worker's next forward pass
  // starts from them, as DDP's broadcast_buffers does before each forward.
  // Models without buffers pay nothing.
  bool broadcast_buffers = true;
};

}  // namespace sray::train
