#pragma once

// The head's record of each node manager's heartbeats (one a second while
// its node runs), to find nodes that stopped answering without dying: a
// frozen or swapping node, or one cut off by the network, whose processes
// UCX still takes for alive. Such a node is declared lost after `timeout`
// without a heartbeat (node_timeout=, 0: never) and is then fenced off
// (core/node_fence.h); node 0, the head's own, is never overdue.
//
// Thread-safety: every member may be called from any thread.

#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

namespace sray::core {

class NodeHeartbeats {
 public:
  using Clock = std::chrono::steady_clock;

  NodeHeartbeats(std::size_t nodes, std::chrono::seconds timeout, Clock::time_point now);

  void Beat(std::uint32_t node, Clock::time_point now);
  // Nodes whose last heartbeat (or the start) is more than the timeout
  // before `now`, each named once. Called every `period` or so: after a
  // longer gap the head itself was stalled (stopped, swapping), its
  // heartbeats from the nodes unread, so the nodes get a full timeout
  // again instead of being declared lost for the head's pause.
  std::vector<std::uint32_t> Overdue(Clock::time_point now);
  static constexpr std::chrono::milliseconds kPeriod{500};
  static constexpr std::chrono::seconds kLongestGap{2};
  [[nodiscard]] std::chrono::seconds timeout() const { return timeout_; }

 private:
  const std::chrono::seconds timeout_;
  std::mutex mutex_;
  std::vector<Clock::time_point> last_;  // guarded by mutex_
  std::vector<bool> declared_;           // guarded by mutex_
  Clock::time_point last_look_;          // guarded by mutex_
};

}  // namespace sray::core
