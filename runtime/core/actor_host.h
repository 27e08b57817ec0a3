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
// Thread-safety: Accept may be called from any thread (a transport
// handler); Serve runs on the worker's main thread and never returns.

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
  // `manager`: the rank of this node's manager, which gets the call counts.
  ActorHost(internal::ActorInstance instance, std::uint64_t actor_id, std::int32_t incarnation,
            std::uint32_t max_concurrency,
            StoreAccess& store, std::uint32_t node_id, transport::Transport& transport,
            std::uint32_t manager, CallerLearner learn_caller);
  [[nodiscard]] std::uint64_t actor_id() const { return actor_id_; }
  void Accept(std::uint32_t caller, transport::Bytes call);
  [[noreturn]] void Serve();

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
  [[noreturn]] void SendTallies();

  const internal::ActorInstance instance_;
  const std::uint64_t actor_id_;
  const std::int32_t incarnation_;
  const std::uint32_t max_concurrency_;
  StoreAccess& store_;
  const std::uint32_t node_id_;
  transport::Transport& transport_;
  const CallerLearner learn_caller_;
  const std::uint32_t manager_;

  std::mutex mutex_;
  std::condition_variable arrived_;
  std::vector<Incoming> incoming_;
  std::deque<Pending> ready_;
  std::unordered_map<std::uint32_t, CallerQueue> callers_;
  std::unordered_map<std::string, FunctionTasks> methods_;  // finished, failed, running
  std::condition_variable tally_wanted_;
  bool tally_changed_ = false;
  std::chrono::steady_clock::time_point last_tally_{};
};

}  // namespace sray::core
