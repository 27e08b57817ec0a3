#pragma once

// Hands rank 0's reports from the training loop to the trainer's NextReport
// call, one at a time: Push waits until the report was taken, so the loop
// never runs ahead of what the driver has stored (a report taken is safe in
// the object store even if this process dies next). Free of LibTorch.
//
// Thread-safety: any thread; typically the loop pushes and an actor call
// takes.

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>

#include "train/worker_protocol.h"

namespace sray::train::internal {

class ReportChannel {
 public:
  // Returns once Take has the event, or at once when the channel is closed.
  void Push(WorkerEvent event);
  // The next event; nullopt once the channel is closed and empty.
  std::optional<WorkerEvent> Take();
  // The loop ended: Take returns what is left, then nullopt.
  void Close();

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<WorkerEvent> waiting_;
  std::uint64_t pushed_ = 0;
  std::uint64_t taken_ = 0;
  bool closed_ = false;
};

}  // namespace sray::train::internal
