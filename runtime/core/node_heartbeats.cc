#include "core/node_heartbeats.h"

#include <algorithm>

namespace sray::core {

NodeHeartbeats::NodeHeartbeats(std::size_t nodes, std::chrono::seconds timeout,
                               Clock::time_point now)
    : timeout_(std::min(timeout, kLongestNodeTimeout)),
      last_(nodes, now),
      declared_(nodes, false),
      last_look_(now) {}

void NodeHeartbeats::Beat(std::uint32_t node, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  if (node < last_.size()) last_[node] = now;
}

std::vector<std::uint32_t> NodeHeartbeats::Overdue(Clock::time_point now) {
  std::vector<std::uint32_t> overdue;
  if (timeout_.count() <= 0) return overdue;
  std::lock_guard lock(mutex_);
  const bool head_stalled = now - last_look_ > kLongestGap;
  last_look_ = now;
  if (head_stalled) {
    for (auto& last : last_) last = std::max(last, now);
    return overdue;
  }
  for (std::uint32_t node = 1; node < last_.size(); ++node) {
    if (declared_[node] || now - last_[node] <= timeout_) continue;
    declared_[node] = true;
    overdue.push_back(node);
  }
  return overdue;
}

}  // namespace sray::core
