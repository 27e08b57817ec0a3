#pragma once

// What a training worker can ask inside train_loop_per_worker: its place in
// the group, its device, the checkpoint to resume from; and Report, which
// hands metrics (and a checkpoint) to the trainer.
//
// Thread-safety: call these from the thread running the training loop (or
// threads it waits for); each worker process runs one loop.

#include <cstdint>
#include <optional>
#include <string>

#include <c10/core/Device.h>

#include "sray/train/checkpoint.h"
#include "sray/train/config.h"

namespace sray::train {

class TrainContext {
 public:
  struct Layout {
    int world_size = 1;
    int world_rank = 0;
    int local_rank = 0;        // among the workers on this node
    int local_world_size = 1;  // workers on this node
    int node_rank = 0;         // this node among the run's nodes, in rank order
    bool use_gpu = false;
    std::string experiment_name;
  };
  explicit TrainContext(Layout layout) : layout_(std::move(layout)) {}

  [[nodiscard]] int GetWorldSize() const { return layout_.world_size; }
  [[nodiscard]] int GetWorldRank() const { return layout_.world_rank; }
  [[nodiscard]] int GetLocalRank() const { return layout_.local_rank; }
  [[nodiscard]] int GetLocalWorldSize() const { return layout_.local_world_size; }
  [[nodiscard]] int GetNodeRank() const { return layout_.node_rank; }
  [[nodiscard]] const std::string& GetExperimentName() const { return layout_.experiment_name; }
  // cuda:0 (the one GPU CUDA_VISIBLE_DEVICES shows this worker) with
  // use_gpu, else the CPU.
  [[nodiscard]] c10::Device GetDevice() const;

 private:
  Layout layout_;
};

// Throws sray::Error outside a training worker.
const TrainContext& GetContext();

// A barrier: every worker calls Report the same number of times. Rank 0's
// metrics are kept (the others' are dropped, as in Ray Train). The
// checkpoint directories given with one Report, by any ranks, become one
// checkpoint in the run's storage (every file of every rank; on a name clash
// the lower rank's file), copied there before Report returns on those ranks,
// so the loop may delete or reuse its directory afterwards.
void Report(const Metrics& metrics);
void Report(const Metrics& metrics, const Checkpoint& checkpoint);

// The checkpoint this group started from: the latest one stored before the
// group (re)started, or the one Fit was told to resume from, as a directory
// on this worker's node; empty on a fresh start. (Checkpoints reported by
// this group are in storage, and reach GetCheckpoint after a restart.)
std::optional<Checkpoint> GetCheckpoint();

}  // namespace sray::train
