#pragma once

// The head's record of each node manager's heartbeats (one a second while
// its node runs), to find nodes that stopped answering without dying: a
// frozen or swapping node, or one cut off by the network, whose processes
// UCX still takes for alive. Such a node is declared lost after `timeout`
// without a heartbeat (node_timeout=, 0: never) and is then fenced off
// (core/node_fence.h); node 0, the head's own, is never overdue.
//
// Thread-safety: every member may be called from any thread.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <vector>

namespace sray::core {

// The longest node_timeout: a year, practically "never" (0 says so plainly).
// Longer ones would overflow the steady clock's nanoseconds in comparisons.
constexpr std::chrono::seconds kLongestNodeTimeout{31'536'000};

class NodeHeartbeats {
 public:
  using Clock = std::chrono::steady_clock;

  // A timeout above kLongestNodeTimeout counts as that.
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

// A node manager's side: whether the head's silence means the head has
// declared this node lost (and fenced it off) rather than died. Counted from
// when the last answered heartbeat was sent, not from when its answer was
// handled: the head heard it no earlier, so once the head has declared this
// node lost, this count is past the timeout too. Counted from the answer, a
// node frozen while a heartbeat was on its way back handled that answer only
// after it resumed, restarted its count there, and took the next failure
// (UCX's endpoint timeout from the freeze) for the head's death: "lost the
// driver", exit 1 (scripts/chaos node-freeze under srun, 2026-12-05).
// Limit: with a node_timeout shorter than an answer's delay (a head stalled
// for longer than that, then dead), the node says it was shut out when the
// head in fact died; with the default 30 s that needs a 30 s answer.
//
// Thread-safety: none; the node's heartbeat loop owns it.
class HeadSilence {
 public:
  using Clock = std::chrono::steady_clock;

  HeadSilence(std::chrono::seconds timeout, Clock::time_point now)
      : timeout_(std::min(timeout, kLongestNodeTimeout)), last_answered_ask_(now) {}

  // A heartbeat sent at `asked` was answered.
  void Answered(Clock::time_point asked) {
    last_answered_ask_ = std::max(last_answered_ask_, asked);
  }
  // With no answer now: has the head declared this node lost by now?
  [[nodiscard]] bool DeclaredLost(Clock::time_point now) const {
    return timeout_.count() > 0 && now - last_answered_ask_ > timeout_;
  }
  [[nodiscard]] Clock::duration Silent(Clock::time_point now) const {
    return now - last_answered_ask_;
  }

 private:
  const std::chrono::seconds timeout_;
  Clock::time_point last_answered_ask_;
};

}  // namespace sray::core
