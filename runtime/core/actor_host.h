#pragma once

// The actor's side, in the worker that runs its constructor: the instance,
// and the calls waiting for it. Calls from each caller run in the order of
// their sequence numbers (a call that arrives early waits for the ones
// before it); with max_concurrency above 1, that many threads run calls at
// once and order is not kept. Each call is answered on the caller's own
// connection with its outcome.
//
// The transport's handler only queues a call's bytes; the threads running
// calls decode them, so the progress thread stays free to receive.
//
// Calls are counted by method (finished, failed, running, queued) for the
// dashboard; a thread of their own sends the counts to the node manager
// when they changed, at most every 250 ms, so a busy actor sends four small
// messages a second and an idle one none.
//
// Kill: Retire, from a transport handler, stops the host when no call runs
// (calls still queued are dropped: their callers learn from the head that
// the actor ended, as when its process dies); Serve then returns, its
// threads joined, and destroying the host destroys the instance. With a
// call running it refuses, and the worker ends its process instead.
//
// Thread-safety: Accept and Retire may be called from any thread (transport
// handlers); Serve runs on the worker's main thread; the host is destroyed
// after Serve returned, by the thread that ran it.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/protocol.h"
#include "core/store_access.h"
#include "sray/internal/function_registry.h"
#include "transport/transport.h"

namespace sray::core {

class ActorHost {
 public:
  // `learn_caller` records a caller's address (sent with its first call) so
  // that answers go out on endpoints of this process's own.
  using CallerLearner = std::function<void(std::uint32_t rank, const std::string& address)>;
  // Whether this process served `actor_id` before: a late call to it is
  // dropped, not answered with an error (its caller hears from the head).
  using ServedBefore = std::function<bool(std::uint64_t actor_id)>;
  // `manager`: the rank of this node's manager, which gets the call counts.
  ActorHost(internal::ActorInstance instance, std::uint64_t actor_id, std::int32_t incarnation,
            std::uint32_t max_concurrency, StoreAccess& store, std::uint32_t node_id,
            transport::Transport& transport, std::uint32_t manager, CallerLearner learn_caller,
            ServedBefore served_before);
  [[nodiscard]] std::uint64_t actor_id() const { return actor_id_; }
  [[nodiscard]] std::int32_t incarnation() const { return incarnation_; }
  void Accept(std::uint32_t caller, transport::Bytes call);
  // False, changing nothing, while a call runs.
  bool Retire();
  // Runs calls until Retire succeeded.
  void Serve();

 private:
  struct Pending {
    TaskSpec spec;
    std::uint32_t caller = 0;
  };
  struct Incoming {
    std::uint32_t caller = 0;
    transport::Bytes bytes;
  };
  struct CallerQueue {
    std::uint64_t next = 0;
    std::map<std::uint64_t, Pending> early;
  };
  void RunCalls();
  // Decodes calls that arrived and releases those whose turn has come;
  // called with the lock held, releases it while decoding.
  void SortIncoming(std::unique_lock<std::mutex>& lock);
  // Sends the counts if they changed since the last send; lock held.
  void SendTally();
  void MarkTallyChanged();  // lock held
  void SendTallies();

  const internal::ActorInstance instance_;
  const std::uint64_t actor_id_;
  const std::int32_t incarnation_;
  const std::uint32_t max_concurrency_;
  StoreAccess& store_;
  const std::uint32_t node_id_;
  transport::Transport& transport_;
  const CallerLearner learn_caller_;
  const ServedBefore served_before_;
  const std::uint32_t manager_;

  std::mutex mutex_;
  std::condition_variable arrived_;
  std::vector<Incoming> incoming_;
  std::deque<Pending> ready_;
  std::unordered_map<std::uint32_t, CallerQueue> callers_;
  std::unordered_map<std::string, FunctionTasks> methods_;  // finished, failed, running
  std::condition_variable tally_wanted_;
  bool tally_changed_ = false;
  std::uint32_t running_ = 0;  // calls running now, on all threads
  bool retired_ = false;
  std::chrono::steady_clock::time_point last_tally_{};
};

}  // namespace sray::core
