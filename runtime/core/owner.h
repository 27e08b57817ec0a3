#pragma once

// The owner side of Ray's ownership model, in every process that submits
// tasks or puts objects (the driver, and workers running nested tasks). It
// creates object ids, keeps each owned object's state and value location,
// resolves a task's ObjectRef arguments before sending it (so values never
// pass through the caller), retries tasks whose worker died, and frees an
// object in its store when the last reference is dropped here and no other
// process borrows it. References to objects other processes own (unpacked
// from values) are borrowed through BorrowedObjects.
//
// Thread-safety: every member may be called from any thread; OnTaskOutcome
// may run inside a transport handler and does not block.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/pooled_allocator.h"
#include "common/recent_ids.h"
#include "core/borrowed_objects.h"
#include "core/protocol.h"
#include "core/store_access.h"
#include "sray/internal/contained_refs.h"
#include "sray/internal/runtime.h"

namespace sray::core {

class ActorCalls;

// The job's max_tasks_in_flight, as the front ends export it to every
// process (SRAY_MAX_TASKS_IN_FLIGHT); 0 (no limit) where it is not set.
std::size_t MaxTasksInFlightOfJob();

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
  std::shared_ptr<internal::ObjectHandle> Borrow(const internal::ObjectId& id,
                                                 std::string_view owner_address) override;
  std::string OwnerAddress(const internal::ObjectId& id) override;

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
  // Reaching the owners of borrowed objects, and being reached as one; set
  // once, before values holding ObjectRefs cross processes. `links` must
  // outlive this Owner.
  void SetBorrowLinks(BorrowLinks& links);

  // The owner's side of borrowing (from transport handlers: none blocks).
  Status AddBorrower(const BorrowerChange& change);
  void RemoveBorrower(const BorrowerChange& change);
  // The process of `rank` ended: every registration it held as a borrower
  // goes (a dead borrower never removes them), and what only it kept is
  // freed. Walks every object this process owns.
  void ForgetBorrower(std::uint32_t rank);
  // The same for every process of a lost node.
  void ForgetBorrowersOn(std::uint32_t node);
  // Whether this owner heard that the process of `rank` ended or its node
  // was lost.
  bool HeardEnded(std::uint32_t rank);
  // `done` runs once `id` is resolved (at once when it is), maybe on
  // another thread.
  void WhenResolved(const internal::ObjectId& id, std::function<void(ObjectStatus)> done);
  // The same after a borrower found no copy of `id` on `lost_on_node`: the
  // object is recomputed from its lineage first while this owner still
  // believes it there; when it cannot be, `done` gets a failure that says why.
  // An object this process only borrows is asked of its owner the same way
  // (an actor's caller, passing on the actor's question).
  void WhenRebuilt(const internal::ObjectId& id, std::uint32_t lost_on_node,
                   std::uint16_t rebuilds_seen, std::function<void(ObjectStatus)> done);
  // An actor's side: its call's argument is no longer on `argument.node`;
  // asks the call's `caller`, which owns or borrows it, to have it rebuilt
  // (as WhenRebuilt) and waits for where it is now. Unavailable without
  // borrow links or when the caller cannot be reached.
  Result<ObjectStatus> AskCallerToRebuild(const ArgumentSpec& argument, std::uint32_t caller);
  // Drops every `done` still waiting (before the transport their answers
  // need goes away).
  void DropStatusWaiters();
  // A task's result holds `contained` and goes to `receiver`: registers the
  // receiver as a borrower of each (with their owners) before the outcome
  // leaves. Blocks; not from a transport handler.
  Result<std::vector<ContainedRef>> Lend(const internal::ContainedRefs& contained,
                                         std::uint32_t receiver);
  // Gives back the registrations of a result this process will not keep
  // (an actor's answer that came too late). Does not block.
  void DiscardLent(const std::vector<ContainedRef>& lent);
  // Frees a result an actor's process may have stored on `node` without
  // this process hearing of it (StoreAccess::DiscardOrphan). Does not block.
  void DiscardOrphanedResult(const OrphanedResult& orphan);
  // How many objects this process owns and borrows (for tests and usage).
  struct Counts {
    std::size_t owned = 0;
    std::size_t borrowed = 0;
    // Requests waiting for the answers of owners of borrowed objects.
    std::size_t waiting_for_owners = 0;
  };
  Counts counts();

  void OnTaskOutcome(TaskOutcome outcome);
  // A new object, owned here, whose bytes are already in place; it keeps the
  // references packed in it alive.
  internal::ObjectId AddInlineObject(std::string value, internal::ContainedRefs contained);
  internal::ObjectId AddSealedStoreObject(const internal::ObjectId& id, std::uint64_t size,
                                          internal::ContainedRefs contained);
  // In a worker: runs one task queued at this worker, if any, and says
  // whether it did. Get and Wait call it while they wait, so tasks the node
  // manager queued behind a task that now waits for others cannot deadlock
  // it. Set before tasks run; called without the owner's lock.
  void SetHelper(std::function<bool()> run_one_queued_task);
  // Wakes waiting Get and Wait calls so they look for queued tasks again.
  void WakeWaiters();
  // Unmaps the empty chunks the tables' pools keep for the next burst
  // (common/block_pool.h): called each time a burst of messages has ended
  // (Transport::SetBurstEndHandler); the compactions after large drains do
  // the same, smaller drains leave them kept. Takes the owner's lock; never
  // blocks otherwise.
  void ReleaseKeptMemory();
  // In a worker: told when a Get or Wait starts to block and when it ends,
  // so the node manager can lend the task's CPUs to others meanwhile (else
  // tasks waiting for their children could hold every CPU). Non-blocking.
  void SetBlockingNotifier(std::function<void(bool blocked)> notify);
  // Fails every unfinished task with `reason` (the node manager is gone).
  void FailAll(const std::string& reason);
  // At most `limit` function tasks submitted here and not finished (0: no
  // limit, the default): SubmitTask waits for room beyond it, so a program
  // that submits millions of tasks holds a bounded number of records (about
  // 1.2 KB each) instead of all of them. Actor calls, retries and
  // recomputations are not held back. Set before tasks are submitted.
  void SetMaxTasksInFlight(std::size_t limit);

 private:
  enum class State { kPending, kReady, kFailed };
  // What only objects shared with other processes need (kept apart, as
  // `failure` is: most objects are never shared).
  struct Sharing {
    std::map<std::uint32_t, std::uint32_t> borrowers;  // rank -> registrations
    internal::ContainedRefs contained;                  // refs packed in the value
    std::vector<std::function<void(ObjectStatus)>> status_waiters;
  };
  struct ObjectEntry {
    State state = State::kPending;
    std::uint32_t handles = 1;  // live ObjectHandles in this process
    int task_uses = 0;          // unfinished tasks that take it as an argument
    std::string inline_value;
    bool in_store = false;
    // Times it was rebuilt from lineage after a copy was lost.
    std::uint16_t rebuilds = 0;
    std::uint32_t node = 0;
    std::uint64_t size = 0;
    std::string producer;  // the task computing it, for messages; empty for Put
    // Set once failed (kept apart: most objects never fail, and the entry
    // stays small).
    std::shared_ptr<const TaskOutcome> failure;
    std::unique_ptr<Sharing> sharing;
    Sharing& shared() {
      if (!sharing) sharing = std::make_unique<Sharing>();
      return *sharing;
    }
  };
  struct PendingTask {
    TaskSpec spec;
    std::vector<std::shared_ptr<internal::ObjectHandle>> argument_handles;
    int max_retries = 0;
    // Resends after a lost argument (RunAgainWithLostArgumentLocked).
    std::uint16_t argument_resends = 0;
    bool retry_exceptions = false;
    bool counted = false;  // in function_tasks_in_flight_
    std::size_t unresolved = 0;
    bool sent = false;
    // Arguments by reference to borrowed objects whose owner was asked for
    // them (indexes into spec.arguments).
    std::vector<std::size_t> asked_owner;
  };
  // A borrowed argument to ask its owner for, once mutex_ is released.
  struct OwnerQuestion {
    std::uint64_t task_id = 0;
    std::size_t index = 0;
    internal::ObjectId id;
    // The task found no copy there: the owner is asked to rebuild it.
    std::optional<std::uint32_t> lost_on_node;
    std::uint16_t rebuilds_seen = 0;
  };
  // Work found under mutex_, done once it is released.
  struct Followups {
    std::vector<TaskSpec> to_send;
    std::vector<TaskOutcome> to_fail;
    std::vector<OwnerQuestion> to_ask;
  };

  // Adds a task (its spec filled but for ids and arguments) and sends it
  // once its arguments are resolved. Function tasks first wait for room
  // under the limit of SetMaxTasksInFlight.
  internal::ObjectId Submit(TaskSpec spec, std::vector<internal::TaskArgument> arguments,
                            int max_retries, bool retry_exceptions);
  // Where a waiting submitter resumes: an eighth below the limit, so that
  // completions wake it once per batch rather than once per task.
  [[nodiscard]] std::size_t ResumeBelowLocked() const;
  void CountInFlightLocked(PendingTask& task);
  // `task` leaves tasks_; wakes a waiting submitter once there is room.
  void UncountInFlightLocked(PendingTask& task);
  // A resolved task to where it runs: the node manager, or the actor.
  void SendTask(TaskSpec spec);
  ActorCalls& Actors();
  // Returns the work to do once mutex_ is released in `followups`.
  void ResolveArgumentsLocked(PendingTask& task, Followups& followups);
  // Asks the owner of borrowed argument `index` where it is (to rebuild it
  // first when `lost`: the task found no copy where the spec said), unless
  // a question for it is open already.
  void AskOwnerLocked(PendingTask& task, std::size_t index, bool lost, Followups& followups);
  void RunFollowups(Followups followups);
  // A borrowed argument's owner answered.
  void OnArgumentStatus(const OwnerQuestion& question, Result<ObjectStatus> status);
  [[nodiscard]] bool Owns(const internal::ObjectId& id) const { return id.owner == identity_.rank; }
  // What a borrower's Get learns of a resolved object owned here.
  static ObjectStatus StatusOf(const ObjectEntry& entry);
  // A reference packed in a task's result, whose registration was made for
  // this process.
  std::shared_ptr<internal::ObjectHandle> AdoptLocked(const ContainedRef& reference);
  void ReleaseIfUnusedLocked(const internal::ObjectId& id,
                             std::vector<std::pair<internal::ObjectId, std::uint32_t>>& to_free,
                             std::vector<std::shared_ptr<internal::ObjectHandle>>& released);
  // Resubmits the task that produced a lost object, if its retries allow.
  // False when the object cannot be recomputed.
  bool Reconstruct(const internal::ObjectId& id, std::uint32_t lost_on_node,
                   std::uint16_t rebuilds_seen);
  // The same with mutex_ held: the task to send and the stale copy to free
  // are added for the caller to act on once it is released.
  // `rebuilds_seen` is the ObjectEntry::rebuilds of the copy found lost: a
  // rebuild made since counts as started (true, nothing done).
  bool ReconstructLocked(const internal::ObjectId& id, std::uint32_t lost_on_node,
                         std::uint16_t rebuilds_seen, std::vector<TaskSpec>& to_send,
                         std::vector<std::pair<internal::ObjectId, std::uint32_t>>& to_free);
  // Why a lost object cannot be recomputed, for messages.
  [[nodiscard]] std::string WhyNotRecomputedLocked(const internal::ObjectId& id,
                                                   const ObjectEntry& entry) const;
  // A task's attempts that counted against its max_retries: resends after a
  // lost argument do not.
  static int RetriesUsed(const PendingTask& task) {
    return task.spec.attempt - static_cast<int>(task.argument_resends);
  }
  // A task whose argument was gone where its spec said (kArgumentLost): the
  // argument is rebuilt from its lineage, and the task, as a retry, waits to
  // run again until it is ready. False, with the reason added to `outcome`'s
  // message, when that cannot be: the outcome then fails the task.
  bool RunAgainWithLostArgumentLocked(
      PendingTask& task, TaskOutcome& outcome, Followups& followups,
      std::vector<std::pair<internal::ObjectId, std::uint32_t>>& to_free);
  [[noreturn]] void ThrowFailure(const TaskOutcome& failure) const;
  // Null when the object is lost (NotFound), with the store's words in
  // `why_lost`; throws for other failures.
  std::shared_ptr<const internal::ObjectValue> ReadStored(const internal::ObjectId& id,
                                                          std::uint32_t node, std::uint64_t size,
                                                          std::string& why_lost);

  const OwnerIdentity identity_;
  StoreAccess& store_;
  const std::function<void(TaskSpec)> submit_;
  std::function<bool()> helper_;
  std::atomic<ActorCalls*> actor_calls_{nullptr};
  std::atomic<BorrowLinks*> borrow_links_{nullptr};
  std::unique_ptr<BorrowedObjects> borrowed_;  // set with the links, then constant
  std::function<void(bool)> blocking_notifier_;
  // Says "blocked" at the first real wait of one Get, Wait or Submit and
  // "running" when that call ends, counted per process: a call made inside
  // another's wait (a queued task the helper runs) neither lends the CPUs
  // twice nor takes them back while the outer call still waits.
  struct BlockedDepth {
    std::mutex mutex;  // orders the notifications with the count
    int waiting_calls = 0;
  };
  class BlockedScope {
   public:
    BlockedScope(const std::function<void(bool)>& notify, BlockedDepth& depth)
        : notify_(notify), depth_(depth) {}
    ~BlockedScope() {
      if (!announced_) return;
      std::lock_guard lock(depth_.mutex);
      if (--depth_.waiting_calls == 0) notify_(false);
    }
    BlockedScope(const BlockedScope&) = delete;
    BlockedScope& operator=(const BlockedScope&) = delete;
    void Announce() {
      if (announced_ || !notify_) return;
      announced_ = true;
      std::lock_guard lock(depth_.mutex);
      if (depth_.waiting_calls++ == 0) notify_(true);
    }

   private:
    const std::function<void(bool)>& notify_;
    BlockedDepth& depth_;
    bool announced_ = false;
  };
  BlockedDepth blocked_depth_;
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
  // Blocks until function_tasks_in_flight_ is at or below the low-water
  // mark, helping and lending its CPUs as Get does; says every minute why
  // it waits.
  void WaitForRoomLocked(std::unique_lock<std::mutex>& lock, BlockedScope& blocked);
  // The Get of objects owned here, and of borrowed ones (into `values` at
  // `slots`; null: at the same indexes as `ids`).
  using Values = std::vector<std::shared_ptr<const internal::ObjectValue>>;
  void GetOwned(const std::vector<internal::ObjectId>& ids, const std::vector<std::size_t>* slots,
                std::chrono::steady_clock::time_point deadline, internal::Timeout timeout,
                BlockedScope& blocked, Values& values);
  // Reads owned `id` into `value` once it is resolved; false when its copy
  // was lost and its rebuild has started (read it again). Throws what Get
  // throws.
  bool ReadOwned(const internal::ObjectId& id, std::chrono::steady_clock::time_point deadline,
                 internal::Timeout timeout, BlockedScope& blocked,
                 std::shared_ptr<const internal::ObjectValue>& value);
  void GetBorrowed(const std::vector<internal::ObjectId>& ids,
                   const std::vector<std::size_t>& slots,
                   std::chrono::steady_clock::time_point deadline, internal::Timeout timeout,
                   BlockedScope& blocked, Values& values);
  // Answers from the owners of borrowed objects, filled from any thread.
  struct OwnerAnswers;
  class StopAskingOwners;
  std::shared_ptr<OwnerAnswers> AskOwners(const std::vector<internal::ObjectId>& ids);
  // The callback that puts an owner's answer in slot `index` and wakes the waiters.
  std::function<void(Result<ObjectStatus>)> AnswerInto(std::shared_ptr<OwnerAnswers> answers,
                                                       std::size_t index);
  // Reads borrowed `id` into `value` from its owner's `answer`; false when
  // the copy the answer names was lost (ask the owner to rebuild it, then
  // read again). Throws what Get throws, and ObjectLostError once
  // `rebuilds_asked` reached kBorrowedRebuildsAsked.
  bool ReadBorrowed(const internal::ObjectId& id, const Result<ObjectStatus>& answer,
                    int rebuilds_asked, std::shared_ptr<const internal::ObjectValue>& value);
  // Whether an owner's answer ends its object's Get with an error whatever
  // else comes (no answer, a failure, an object it does not know).
  static bool IsFinalFailure(const Result<ObjectStatus>& answer);
  // Has the owners of borrowed `ids[index]` for each of `lost` rebuild the
  // copy its `latest` answer named, all at once; their answers, once rebuilt
  // (or why they cannot be), replace those in `latest`. Throws
  // GetTimeoutError at `deadline`.
  void AskOwnersToRebuild(const std::vector<internal::ObjectId>& ids,
                          const std::vector<std::size_t>& lost,
                          std::vector<Result<ObjectStatus>>& latest,
                          std::chrono::steady_clock::time_point deadline, internal::Timeout timeout,
                          BlockedScope& blocked);
  // Wakes this Owner's waiters from callbacks that may outlive it.
  struct WakeToken {
    std::mutex mutex;
    Owner* owner = nullptr;
  };
  std::shared_ptr<WakeToken> wake_token_ = std::make_shared<WakeToken>();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::uint64_t next_index_ = 1;
  std::uint64_t next_task_ = 1;
  // Node-based tables whose entries a burst of tasks makes by the million:
  // from block pools, which give their memory back once the burst drains
  // (common/pooled_allocator.h). The pools take no lock: every change to
  // these tables happens under mutex_. Declared before the tables, so
  // destroyed after them.
  SerialBlockPools table_pools_;
  template <typename Key, typename Value, typename Hash = std::hash<Key>>
  using PooledTable = std::unordered_map<Key, Value, Hash, std::equal_to<Key>,
                                         SerialPoolAllocator<std::pair<const Key, Value>>>;
  PooledTable<internal::ObjectId, ObjectEntry, internal::ObjectIdHash> objects_{
      SerialPoolAllocator<std::pair<const internal::ObjectId, ObjectEntry>>(&table_pools_)};
  // Every rank ever registered as a borrower here and not ended since:
  // ForgetBorrower walks objects_ only for those.
  std::unordered_set<std::uint32_t> borrower_ranks_;
  // Borrowers known to have ended: a registration for one that arrives
  // after the news (a worker lending a task's result to its dead submitter)
  // is not kept. A node gives out none of its last kEndedBorrowersRemembered
  // ended ranks again (LocalScheduler::StartOneWorker), so none here names
  // a live process; lost nodes never return.
  RecentIds ended_borrowers_{kEndedBorrowersRemembered};
  std::set<std::uint32_t> lost_borrower_nodes_;  // guarded by mutex_
  // Whether the process of `rank` ended (or its node was lost), as this
  // owner was told.
  bool IsEndedBorrowerLocked(std::uint32_t rank) const;
  // Drops the registrations of `ranks` (those that borrowed here), and
  // frees what only they kept.
  void DropBorrowers(const std::vector<std::uint32_t>& ranks);
  PooledTable<std::uint64_t, PendingTask> tasks_{
      SerialPoolAllocator<std::pair<const std::uint64_t, PendingTask>>(&table_pools_)};
  std::size_t max_tasks_in_flight_ = 0;  // 0: no limit
  std::size_t function_tasks_in_flight_ = 0;
  std::size_t submitters_waiting_ = 0;
  bool told_of_limit_ = false;  // the first wait is logged
  // Finished tasks whose result lives in a store, kept (with their
  // arguments) while the result is referenced: lineage for recomputing it
  // when its node loses it.
  PooledTable<internal::ObjectId, PendingTask, internal::ObjectIdHash> lineage_{
      SerialPoolAllocator<std::pair<const internal::ObjectId, PendingTask>>(&table_pools_)};
  // Shrinks the tables above after a large drain, and takes their pools'
  // empty chunks out into `empty_chunks` then and once more when the drain
  // is over; true when it did either (the caller then unmaps them and
  // returns freed memory to the system, without the lock).
  bool CompactIfDrainedLocked(BlockPool::DetachedChunks& empty_chunks);
  bool release_pools_when_drained_ = false;  // guarded by mutex_
  // Pending object -> the blocked Gets and Waits watching it.
  std::unordered_map<internal::ObjectId, std::vector<Waiter*>, internal::ObjectIdHash> watchers_;
  // Argument object -> tasks waiting for it.
  std::unordered_map<internal::ObjectId, std::vector<std::uint64_t>, internal::ObjectIdHash>
      waiting_;
};

}  // namespace sray::core
