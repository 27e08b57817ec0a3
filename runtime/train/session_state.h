#pragma once

// The state of the training session running in this process, shared by
// GetContext, Report, GetCheckpoint, PrepareModel and DistributedSampler.
// Set by RunWorkerSession for the duration of the loop.
//
// Thread-safety: the pointer is swapped under a mutex; the session's fields
// are used from the loop's thread, except `samples` (atomic).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "sray/train/context.h"
#include "train/collectives.h"
#include "train/gradient_reducer.h"
#include "train/report_channel.h"
#include "train/worker_protocol.h"

namespace sray::train::internal {

struct Session {
  std::unique_ptr<TrainContext> context;
  WorkerAssignment assignment;
  ReportChannel* reports = nullptr;
  std::string checkpoint_path;  // the restored checkpoint, if any
  std::unique_ptr<Collectives> collectives;
  std::vector<std::unique_ptr<GradientReducer>> reducers;  // after collectives: destroyed first
  std::unordered_set<const void*> prepared;  // TensorImpls of parameters under a reducer
  std::atomic<std::uint64_t> samples{0};
  std::chrono::steady_clock::time_point last_report;
  std::uint64_t checkpoints_staged = 0;  // names this worker's staged parts apart
};

void SetCurrentSession(std::shared_ptr<Session> session);
// Throws sray::Error naming the fix outside a training worker.
Session& CurrentSession();
// Null outside a training worker.
std::shared_ptr<Session> CurrentSessionOrNull();
// Before a training step (DistributedSampler::next): hooks the gradients of
// prepared modules again where torch::load replaced their accumulators.
void ReattachGradientHooks(Session& session);

}  // namespace sray::train::internal
