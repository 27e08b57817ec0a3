#pragma once

// The owner side of Ray's ownership model, in every process that submits
// tasks or puts objects (the driver, and workers running nested tasks). It
// creates object ids, keeps each owned object's state and value location,
// resolves a task's ObjectRef arguments before sending it (so values never
// pass through the caller), retries tasks whose worker died, and frees an
// object in its store when the last reference is dropped.
//
// Thread-safety: every member may be called from any thread; OnTaskOutcome
// may run inside a transport handler and does not block.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/protocol.h"
#include "core/store_access.h"
#include "sray/internal/runtime.h"

namespace sray::core {

class ActorCalls;

struct OwnerIdentity {
  std::uint32_t rank = 0;
  std::uint32_t node_id = 0;
};

class Owner final : public internal::Runtime {
 public:
  // `submit` hands a ready task to the node manager; it must not block (it
  // is called from transport handlers too).
  Owner(OwnerIdentity identity, StoreAccess& store, std::function<void(TaskSpec)> submit);
  ~Owner() override;

  internal::ObjectId SubmitTask(const std::string& function,
                                std::vector<internal::TaskArgument> arguments,
                                const internal::TaskOptions& options) override;
  std::unique_ptr<internal::ObjectBuilder> CreateObject(std::size_t size) override;
  std::vector<std::shared_ptr<const internal::ObjectValue>> Get(
      const std::vector<internal::ObjectId>& ids, internal::Timeout timeout) override;
  std::vector<bool> Wait(const std::vector<internal::ObjectId>& ids, std::size_t num_ready,
                         internal::Timeout timeout) override;
  void RemoveReference(const internal::ObjectId& id) noexcept override;

  // Actors, through the ActorCalls (set before use).
  internal::ActorId CreateActor(const std::string& factory,
                                std::vector<internal::TaskArgument> arguments,
                                const internal::ActorOptions& options) override;
  internal::ObjectId SubmitActorTask(internal::ActorId actor, int max_task_retries,
                                     const std::string& method,
                                     std::vector<internal::TaskArgument> arguments,
                                     const std::string& name) override;
  std::optional<internal::NamedActor> FindNamedActor(const std::string& name) override;
  void KillActor(internal::ActorId actor, bool no_restart) override;
  std::uint64_t CreatePlacementGroup(const std::string& name,
                                     const std::vector<std::map<std::string, double>>& bundles,
                                     PlacementStrategy strategy) override;
  internal::PlacementGroupState WaitPlacementGroup(std::uint64_t id,
                                                   internal::Timeout timeout) override;
  void RemovePlacementGroup(std::uint64_t id) override;
  // Actor calls go through `actors`; it must outlive its use here.
  void SetActorCalls(ActorCalls* actors);

  void OnTaskOutcome(TaskOutcome outcome);
  // A new object, owned here, whose bytes are already in place.
  internal::ObjectId AddInlineObject(std::string value);
  internal::ObjectId AddSealedStoreObject(const internal::ObjectId& id, std::uint64_t size);
  // In a worker: runs one task queued at this worker, if any, and says
  // whether it did. Get and Wait call it while they wait, so tasks the node
  // manager queued behind a task that now waits for others cannot deadlock
  // it. Set before tasks run; called without the owner's lock.
  void SetHelper(std::function<bool()> run_one_queued_task);
  // Wakes waiting Get and Wait calls so they look for queued tasks again.
  void WakeWaiters();
  // In a worker: told when a Get or Wait starts to block and when it ends,
  // so the node manager can lend the task's CPUs to others meanwhile (else
  // tasks waiting for their children could hold every CPU). Non-blocking.
  void SetBlockingNotifier(std::function<void(bool blocked)> notify);
  // Fails every unfinished task with `reason` (the node manager is gone).
  void FailAll(const std::string& reason);

 private:
  enum class State { kPending, kReady, kFailed };
  struct ObjectEntry {
    State state = State::kPending;
    bool referenced = true;  // the caller's handle is alive
    int task_uses = 0;       // unfinished tasks that take it as an argument
    std::string inline_value;
    bool in_store = false;
    std::uint32_t node = 0;
    std::uint64_t size = 0;
    std::string producer;  // the task computing it, for messages; empty for Put
    // Set once failed (kept apart: most objects never fail, and the entry
    // stays small).
    std::shared_ptr<const TaskOutcome> failure;
  };
  struct PendingTask {
    TaskSpec spec;
    std::vector<std::shared_ptr<internal::ObjectHandle>> argument_handles;
    int max_retries = 0;
    bool retry_exceptions = false;
    std::size_t unresolved = 0;
    bool sent = false;
  };

  // Adds a task (its spec filled but for ids and arguments) and sends it
  // once its arguments are resolved.
  internal::ObjectId Submit(TaskSpec spec, std::vector<internal::TaskArgument> arguments,
                            int max_retries, bool retry_exceptions);
  // A resolved task to where it runs: the node manager, or the actor.
  void SendTask(TaskSpec spec);
  ActorCalls& Actors();
  // Each returns the work to do once mutex_ is released.
  void ResolveArgumentsLocked(PendingTask& task, std::vector<TaskSpec>& to_send,
                              std::vector<TaskOutcome>& to_fail);
  void ReleaseIfUnusedLocked(const internal::ObjectId& id,
                             std::vector<std::pair<internal::ObjectId, std::uint32_t>>& to_free,
                             std::vector<std::shared_ptr<internal::ObjectHandle>>& released);
  // Resubmits the task that produced a lost object, if its retries allow.
  // False when the object cannot be recomputed.
  bool Reconstruct(const internal::ObjectId& id, std::uint32_t lost_on_node);
  [[noreturn]] void ThrowFailure(const TaskOutcome& failure) const;
  // Null when the object is lost (NotFound); throws for other failures.
  std::shared_ptr<const internal::ObjectValue> ReadStored(const internal::ObjectId& id,
                                                          std::uint32_t node, std::uint64_t size);

  const OwnerIdentity identity_;
  StoreAccess& store_;
  const std::function<void(TaskSpec)> submit_;
  std::function<bool()> helper_;
  std::atomic<ActorCalls*> actor_calls_{nullptr};
  std::function<void(bool)> blocking_notifier_;
  // Says "blocked" once, at the first real wait of one Get or Wait, and
  // "running" when that call ends.
  class BlockedScope {
   public:
    explicit BlockedScope(const std::function<void(bool)>& notify) : notify_(notify) {}
    ~BlockedScope() {
      if (announced_) notify_(false);
    }
    BlockedScope(const BlockedScope&) = delete;
    BlockedScope& operator=(const BlockedScope&) = delete;
    void Announce() {
      if (!announced_ && notify_) {
        announced_ = true;
        notify_(true);
      }
    }

   private:
    const std::function<void(bool)>& notify_;
    bool announced_ = false;
  };
  // A Get or Wait that blocks: woken once `completions_needed` of the
  // objects it watches have finished, not at every outcome (waking for each
  // result would wake a Get of 1000 results a thousand times).
  struct Waiter {
    std::size_t completions_needed = 0;
  };
  // Watches those of `ids` still pending for `waiter` (each adds one to
  // completions_needed) while it lives. Construct and destroy under mutex_;
  // `ids` must outlive it.
  class WatchScope {
   public:
    WatchScope(Owner& owner, const std::vector<internal::ObjectId>& ids, Waiter& waiter);
    ~WatchScope();
    WatchScope(const WatchScope&) = delete;
    WatchScope& operator=(const WatchScope&) = delete;

   private:
    Owner& owner_;
    const std::vector<internal::ObjectId>& ids_;
    Waiter& waiter_;
  };
  // `id` is no longer pending: counts it for its waiters, wakes those done.
  void NotifyCompletionLocked(const internal::ObjectId& id);
  // Blocks on changed_ until `done`, the deadline, or a wake-up; runs
  // queued tasks through the helper meanwhile. Returns done().
  template <typename Done>
  bool WaitHelping(std::unique_lock<std::mutex>& lock,
                   std::chrono::steady_clock::time_point deadline, BlockedScope& blocked,
                   Done done);

  std::mutex mutex_;
  std::condition_variable changed_;
  std::uint64_t next_index_ = 1;
  std::uint64_t next_task_ = 1;
  std::unordered_map<internal::ObjectId, ObjectEntry, internal::ObjectIdHash> objects_;
  std::unordered_map<std::uint64_t, PendingTask> tasks_;
  // Finished tasks whose result lives in a store, kept (with their
  // arguments) while the result is referenced: lineage for recomputing it
  // when its node loses it.
  std::unordered_map<internal::ObjectId, PendingTask, internal::ObjectIdHash> lineage_;
  // Pending object -> the blocked Gets and Waits watching it.
  std::unordered_map<internal::ObjectId, std::vector<Waiter*>, internal::ObjectIdHash> watchers_;
  // Argument object -> tasks waiting for it.
  std::unordered_map<internal::ObjectId, std::vector<std::uint64_t>, internal::ObjectIdHash>
      waiting_;
};

}  // namespace sray::core
