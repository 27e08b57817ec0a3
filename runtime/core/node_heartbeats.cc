#include "core/node_heartbeats.h"

namespace sray::core {

NodeHeartbeats::NodeHeartbeats(std::size_t nodes, std::chrono::seconds timeout,
                               Clock::time_point now)
    : timeout_(timeout), last_(nodes, now), declared_(nodes, false) {}

void NodeHeartbeats::Beat(std::uint32_t node, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  if (node < last_.size()) last_[node] = now;
}

std::vector<std::uint32_t> NodeHeartbeats::Overdue(Clock::time_point now) {
  std::vector<std::uint32_t> overdue;
  if (timeout_.count() <= 0) return overdue;
  std::lock_guard lock(mutex_);
  for (std::uint32_t node = 1; node < last_.size(); ++node) {
    if (declared_[node] || now - last_[node] <= timeout_) continue;
    declared_[node] = true;
    overdue.push_back(node);
  }
  return overdue;
}

}  // namespace sray::core
