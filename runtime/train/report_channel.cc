#include "train/report_channel.h"

#include <utility>

namespace sray::train::internal {

void ReportChannel::Push(WorkerEvent event) {
  std::unique_lock lock(mutex_);
  if (closed_) return;
  changed_.wait(lock, [&] { return !waiting_ || closed_; });
  if (closed_) return;
  waiting_ = std::move(event);
  const std::uint64_t mine = ++pushed_;
  changed_.notify_all();
  changed_.wait(lock, [&] { return acknowledged_ >= mine || closed_; });
}

void ReportChannel::Acknowledge(std::uint64_t stored) {
  std::lock_guard lock(mutex_);
  if (stored <= acknowledged_) return;
  acknowledged_ = stored;
  changed_.notify_all();
}

std::optional<WorkerEvent> ReportChannel::Take() {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return waiting_.has_value() || closed_; });
  if (!waiting_) return std::nullopt;
  std::optional<WorkerEvent> event = std::move(waiting_);
  waiting_.reset();
  ++taken_;
  changed_.notify_all();
  return event;
}

void ReportChannel::Close() {
  std::lock_guard lock(mutex_);
  closed_ = true;
  changed_.notify_all();
}

std::uint64_t ReportChannel::pushed() const {
  std::lock_guard lock(mutex_);
  return pushed_;
}

}  // namespace sray::train::internal
