#pragma once

// Hands rank 0's reports from the training loop to the trainer's NextReport
// call, one at a time: Push waits until the driver acknowledged that it
// stored the report (its next NextReport call says how many it stored), so
// the loop never runs ahead of what the driver has stored, and Report's
// promise (the checkpoint is in storage when it returns) holds. Free of
// LibTorch.
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
  // Returns once the event was taken and acknowledged, or when the channel
  // is closed.
  void Push(WorkerEvent event);
  // The driver has stored `stored` events in all.
  void Acknowledge(std::uint64_t stored);
  // The next event; nullopt once the channel is closed and empty.
  std::optional<WorkerEvent> Take();
  // The loop ended: Take returns what is left, then nullopt.
  void Close();
  // Events pushed so far (the one a Push waits with included).
  [[nodiscard]] std::uint64_t pushed() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::optional<WorkerEvent> waiting_;
  std::uint64_t pushed_ = 0;
  std::uint64_t taken_ = 0;
  std::uint64_t acknowledged_ = 0;
  bool closed_ = false;
};

}  // namespace sray::train::internal
