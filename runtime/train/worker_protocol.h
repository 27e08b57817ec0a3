#pragma once

// What the driver's trainer and its training workers (TrainWorker actors)
// say to each other, as msgpack values carried by actor calls. Free of
// LibTorch.

#include <cstdint>
#include <string>
#include <vector>

#include <msgpack.hpp>

#include "sray/actor.h"
#include "sray/train/config.h"
#include "train/checkpoint_storage.h"
#include "train/rendezvous_store.h"

namespace sray::train::internal {

// Prepare's answer: where the worker runs.
struct WorkerDescription {
  std::uint32_t node_id = 0;
  std::string hostname;
  std::int64_t pid = 0;
  std::uint16_t master_port = 0;  // rank 0 only: free for MASTER_PORT
  bool sees_storage = false;      // its node sees the run directory
  MSGPACK_DEFINE(node_id, hostname, pid, master_port, sees_storage)
};

// Everything Run needs to join the group and run the loop.
struct WorkerAssignment {
  std::string function;  // the loop's registered name
  std::string config;    // its serialized argument
  std::string experiment_name;
  int world_size = 1;
  int world_rank = 0;
  int local_rank = 0;
  int local_world_size = 1;
  int node_rank = 0;
  int attempt = 0;
  bool use_gpu = false;
  int threads = 1;  // intra-op threads: the CPUs the worker holds
  sray::ActorHandle<RendezvousStore> rendezvous;  // this attempt's
  std::string group_secret;                       // for the member tags
  std::string master_address;
  std::uint16_t master_port = 0;
  std::int64_t timeout_milliseconds = 300000;
  std::uint64_t bucket_bytes = 25U << 20U;
  std::uint64_t first_bucket_bytes = 1U << 20U;
  bool broadcast_buffers = true;
  bool has_checkpoint = false;
  std::uint64_t checkpoint_index = 0;  // its number in storage
  // Where this worker's node sees the run directory: checkpoints are staged
  // there (not sent), and the one to resume from is copied from
  // `checkpoint_path` (not sent either).
  std::string run_directory;
  bool stage_checkpoints = false;
  std::string checkpoint_path;
  MSGPACK_DEFINE(function, config, experiment_name, world_size, world_rank, local_rank,
                 local_world_size, node_rank, attempt, use_gpu, threads, rendezvous, group_secret,
                 master_address, master_port, timeout_milliseconds, bucket_bytes,
                 first_bucket_bytes, broadcast_buffers, has_checkpoint, checkpoint_index,
                 run_directory, stage_checkpoints, checkpoint_path)
};

enum class WorkerEventKind : std::uint8_t {
  kReport = 0,    // rank 0 reported, or another rank's checkpoint part
  kFinished = 1,  // the loop returned (Run's answer; NextReport's when no report is left)
};

struct WorkerEvent {
  std::uint8_t kind = static_cast<std::uint8_t>(WorkerEventKind::kFinished);
  Metrics metrics;
  double seconds = 0;         // since rank 0's previous report (or its start)
  std::uint64_t samples = 0;  // over all workers since then
  bool has_checkpoint = false;
  CheckpointFiles checkpoint;  // the part's files, unless it was staged
  std::string staged;          // the staged part's name in the run directory
  // Rank 0's report: the other ranks that gave a checkpoint part with it
  // (their NextReport answers it).
  std::vector<std::int32_t> checkpoint_ranks;
  MSGPACK_DEFINE(kind, metrics, seconds, samples, has_checkpoint, checkpoint, staged,
                 checkpoint_ranks)
};

}  // namespace sray::train::internal
