#pragma once

// A node's scheduling decisions, with no transport and no processes: which
// task goes to which worker here, which moves to another node, when a worker
// must be started, what a finished task or a dead worker means. Each step
// returns the effects it decided, in order, and the node manager carries
// them out (send, spawn, kill, report), as ActorDirectory::Run does for
// actors. That keeps every rule here testable with plain values.
//
// Rules (Ray's raylet, kept):
// - Waiting tasks queue by resource shape (scheduling classes): FIFO within
//   a shape, a shape that does not fit is skipped as a whole.
// - A task goes to an idle worker here with a fresh grant; a task submitted
//   here that does not fit moves to a node with the resources free, or a
//   short queue; one no node could ever run fails at once as infeasible.
// - Tasks submitted here beyond what this node's free resources hold move
//   at once to nodes with those resources free: waiting here would cost them
//   a worker start or a task's run first (a burst's first tasks then start
//   workers on every node together, not one node after another).
// - A task forwarded here that finds no room moves on once more, to a node
//   with the resources free now (Ray's spillback): views of other nodes lag
//   their updates, so two forwards can meet on a node with room for one, and
//   the second must not wait behind a long task while a node is idle. The
//   owner's node manager, which tracks where its tasks run, is told.
// - Behind a busy worker of the same shape, up to kTasksPipelinedPerWorker
//   tasks wait in the worker, only when this node has no room of its own
//   and more than one task of that shape waits: a lone task stays queued,
//   free to take the next worker here or room elsewhere.
// - A task waiting in Get lends its CPUs (not GPUs) until it resumes.
// - Workers are started for tasks that fit but find no idle worker, capped
//   by max_workers (actors' workers, and workers whose task waits in Get,
//   not counted: a pool all waiting would leave nothing to run what the
//   waits need); three workers dying
//   before they register, before any ever did, fail the queue with the fix.
// - A killed actor's worker goes back to the pool when it can (no GPU, no
//   call running): the next actor or task here needs no process start.
//   Otherwise its process is killed, as a constructor's that is still
//   running always is. Idle workers above max_workers end after
//   kSurplusIdleLimit, asked first (AskWorkerToEnd): one that still owns
//   objects stays, idle, and is asked again after the same time.
//
// Thread-safety: none; the node manager calls it from its event loop only.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "common/recent_ids.h"
#include "core/protocol.h"
#include "sched/resources.h"

namespace sray::core {

// Tasks a busy worker may hold beyond the one it runs: hides the round trip
// to the node manager between tasks.
inline constexpr std::size_t kTasksPipelinedPerWorker = 4;
// A node takes tasks from busy neighbours while its queue is shorter than
// this many per CPU.
inline constexpr double kQueuedPerRemoteCpu = 32;
// Moves a task makes at most. Its submitter's node may send it on for load
// once; every other move is to a node whose view showed room for it. Views
// lag by a few milliseconds, so a task can land where the room is already
// taken, and it moves on when an update shows room elsewhere: kept, it
// could wait out a long task while other nodes were idle. The bound only
// stops a task bouncing between nodes whose views all lag.
inline constexpr std::uint32_t kMostHops = 8;

// How long a worker asked to retire its actor may take (its destructor has
// a second, core/worker_reuse.h) before its process is killed.
inline constexpr std::chrono::seconds kRetireLimit{5};
// Idle workers above max_workers (killed actors' workers back from a burst)
// are kept this long for the next actors, then ended, the longest idle
// first (Ray's idle worker killing, with its threshold).
inline constexpr std::chrono::seconds kSurplusIdleLimit{1};

namespace effects {
// Hand `task` to worker `worker` (kExecuteTask).
struct RunOnWorker {
  std::uint32_t worker = 0;
  TaskSpec task;
};
// Pass `task` to the node manager at `node_rank` (kSubmitTask).
struct ForwardToNode {
  std::uint32_t node_rank = 0;
  TaskSpec task;
};
// Deliver a task's outcome to its owner (or the actor directory, for an
// actor's constructor).
struct DeliverOutcome {
  TaskOutcome outcome;
};
// An actor's constructor succeeded in `outcome.worker_rank`: report it to
// the actor directory with that worker's address.
struct ActorReady {
  TaskOutcome outcome;
};
struct ActorProcessDied {
  ActorDeath death;
};
// Start a worker process with transport rank `rank`; report back with
// OnWorkerSpawned or OnWorkerSpawnFailed.
struct StartWorker {
  std::uint32_t rank = 0;
};
struct KillWorker {
  pid_t pid = 0;
};
// Ask the idle worker `worker` whether it may end (kMayWorkerEnd); it
// answers through OnWorkerEndReply. Until then it takes no task.
struct AskWorkerToEnd {
  std::uint32_t worker = 0;
};
// Ask worker `worker` to destroy its actor and return to the pool
// (kRetireActor); it answers through OnActorRetired, or ends its process.
struct RetireActor {
  std::uint32_t worker = 0;
  ActorKill kill;
};
// Tell the manager of node `owner_node` that its task moved on (kTaskMoved).
struct TellTaskMoved {
  std::uint32_t owner_node = 0;
  TaskMoved moved;
};
// The worker's process is gone: forget its address.
struct ForgetWorker {
  std::uint32_t rank = 0;
};
// A task's attempt died with its worker: whatever that attempt had made of
// its result in this node's store (created, or sealed before the outcome
// could be sent) is unreachable, since the owner retries and the retry makes
// its own copy. Free it, or it would stay until the step ends.
struct DiscardResult {
  ObjectId id;
};
}  // namespace effects

using SchedulerEffect =
    std::variant<effects::RunOnWorker, effects::ForwardToNode, effects::DeliverOutcome,
                 effects::ActorReady, effects::ActorProcessDied, effects::StartWorker,
                 effects::KillWorker, effects::AskWorkerToEnd, effects::RetireActor,
                 effects::ForgetWorker, effects::DiscardResult, effects::TellTaskMoved>;
using SchedulerEffects = std::vector<SchedulerEffect>;

struct LocalSchedulerConfig {
  std::uint32_t node_id = 0;
  sched::ResourceMap total;
  std::uint32_t gpu_devices = 0;
  std::uint32_t max_workers = 4;
};

class LocalScheduler {
 public:
  explicit LocalScheduler(LocalSchedulerConfig config);

  // Node ranks and totals of the whole job; nothing is dispatched before.
  SchedulerEffects ApplyClusterView(std::vector<NodeDescription> nodes);
  SchedulerEffects OnResourceUpdate(const ResourceUpdate& update);
  SchedulerEffects Submit(TaskSpec spec);
  SchedulerEffects OnWorkerSpawned(std::uint32_t rank, pid_t pid);
  SchedulerEffects OnWorkerSpawnFailed(std::uint32_t rank, const std::string& why);
  SchedulerEffects OnWorkerRegistered(std::uint32_t rank);
  SchedulerEffects OnTaskDone(std::uint32_t worker_rank, TaskOutcome outcome);
  SchedulerEffects OnWorkerBlocked(std::uint32_t worker_rank, bool blocked);
  SchedulerEffects OnWorkerExited(pid_t pid, const std::string& how);
  // The head lost `node`: nothing more goes there, and the tasks this node
  // forwarded there (for owners on this node) get a kWorkerDied outcome, so
  // their owners run them again within their retries.
  SchedulerEffects OnNodeLost(std::uint32_t node, const std::string& cause);
  // An outcome on its way to an owner on this node: the task is no longer
  // out on another node.
  void OnOutcomeRouted(const TaskOutcome& outcome);
  // A task this node forwarded moved on from there: its loss now follows
  // the node it went to (at once, when that node is already lost).
  SchedulerEffects OnTaskMoved(const TaskMoved& moved);
  [[nodiscard]] bool IsLost(std::uint32_t node) const { return node < lost_.size() && lost_[node]; }
  // Ends an actor: its worker, if it serves the actor and holds no GPU, is
  // asked to retire it (RetireActor); otherwise, or while
  // the constructor runs, its process is killed.
  SchedulerEffects StopActor(const ActorKill& kill,
                             std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());
  // The worker destroyed the actor `retired` names and is idle again.
  SchedulerEffects OnActorRetired(std::uint32_t worker_rank, const ActorKill& retired);
  // Kills the processes of workers asked to retire an actor, or to end,
  // more than kRetireLimit before `now` that neither answered nor ended, and
  // asks idle workers above max_workers idle for kSurplusIdleLimit to end.
  SchedulerEffects EndOverdue(std::chrono::steady_clock::time_point now);
  // Worker `worker_rank`, asked to end, owns `owned_objects`: with none its
  // process is killed; otherwise ending it would lose objects other
  // processes may read, so it is idle again, from `now`.
  SchedulerEffects OnWorkerEndReply(
      std::uint32_t worker_rank, std::uint64_t owned_objects,
      std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());
  // When EndOverdue has work next, if ever.
  [[nodiscard]] std::optional<std::chrono::steady_clock::time_point> NextDeadline() const;

  // What other nodes should hear of this one, when it changed since the
  // last MarkBroadcast.
  [[nodiscard]] bool NeedsBroadcast() const;
  // Whether the worker of this rank still serves that incarnation of the
  // actor (retiring included; not once it retired or its exit was seen).
  [[nodiscard]] bool ServesActor(std::uint32_t rank, std::uint64_t actor_id,
                                 std::int32_t incarnation) const;
  ResourceUpdate MarkBroadcast();
  [[nodiscard]] const std::vector<NodeDescription>& nodes() const { return nodes_; }
  [[nodiscard]] std::size_t queued() const { return queued_; }
  [[nodiscard]] const sched::ResourceMap& available() const { return available_; }
  [[nodiscard]] std::size_t workers() const { return workers_.size(); }
  // Ranks of the workers that registered and whose end was not seen.
  [[nodiscard]] std::vector<std::uint32_t> RegisteredWorkers() const;
  // Tasks waiting here and handed to workers now, by function, for the
  // dashboard (the queued and running counts; the rest stay 0).
  [[nodiscard]] std::map<std::string, FunctionTasks> CurrentTasks() const;

 private:
  struct Worker {
    pid_t pid = 0;  // 0 until spawned
    bool registered = false;
    // Tasks handed to the worker: the front one runs, the rest wait in the
    // worker. They share one grant, as the worker runs them in turn.
    std::deque<TaskSpec> assigned;
    sched::ResourceMap granted;
    std::vector<std::uint32_t> devices;
    // CPUs of the grant lent to other tasks while its task waits in Get.
    double lent_cpus = 0;
    // The actor it serves once its constructor succeeded (0: none); the
    // grant is then held until the process ends.
    std::uint64_t actor_id = 0;
    std::int32_t incarnation = 0;
    // Asked to retire its actor; until it answers or ends, it still is the
    // actor's and counts as a task worker to come.
    bool retiring = false;
    std::chrono::steady_clock::time_point retire_deadline{};
    std::chrono::steady_clock::time_point idle_since{};
    // Asked to end as surplus, or being killed; no longer idle. Waits for
    // its answer until end_reply_deadline (max once it answered).
    bool ending = false;
    std::chrono::steady_clock::time_point end_reply_deadline =
        std::chrono::steady_clock::time_point::max();
  };
  enum class ForwardTo {
    kFree,              // resources free now and nothing queued
    kFreeOrShortQueue,  // resources free now, or a queue shorter than the limit
    kAnyFeasible,       // any node whose totals fit (this one's do not)
  };

  void Schedule(TaskSpec spec, SchedulerEffects& effects);
  void Dispatch(SchedulerEffects& effects);
  void StartOneWorker(SchedulerEffects& effects);
  bool Forward(TaskSpec& spec, ForwardTo where, SchedulerEffects& effects);
  void Assign(std::uint32_t rank, Worker& worker, TaskSpec task, SchedulerEffects& effects);
  void ReleaseGrant(Worker& worker);
  void MarkIdle(std::uint32_t rank, Worker& worker,
                std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());
  [[nodiscard]] bool HasSurplusIdle() const;
  [[nodiscard]] std::size_t SurplusIdle() const;
  // Workers whose function task waits in Get, its CPUs lent: not counted
  // against max_workers.
  [[nodiscard]] std::size_t TaskWorkersWaitingInGet() const;
  void FailQueued(OutcomeKind kind, const std::string& message, SchedulerEffects& effects);
  [[nodiscard]] TaskOutcome OutcomeFor(const TaskSpec& spec, OutcomeKind kind,
                                       std::string message) const;
  [[nodiscard]] std::string InfeasibleMessage(const TaskSpec& spec) const;

  const LocalSchedulerConfig config_;
  std::vector<NodeDescription> nodes_;
  std::vector<sched::ResourceMap> node_available_;
  std::vector<std::uint32_t> node_queued_;
  std::vector<bool> lost_;  // per node
  std::unordered_map<std::uint32_t, std::string> lost_causes_;  // of the lost nodes
  // Tasks of owners on this node that it forwarded, until their outcomes
  // pass through Route: what a kWorkerDied outcome needs if their node is
  // lost. A task that moves on from the node it went to is followed
  // (kTaskMoved, OnTaskMoved).
  // (The owner names the function in the outcome: nothing is copied here.)
  struct ForwardedTask {
    std::uint32_t node = 0;
    ObjectId return_id;
    std::int32_t attempt = 0;  // echoed in the outcome the node's loss makes
    std::uint32_t hops = 0;    // of the latest move heard of
  };
  struct ForwardKey {
    std::uint32_t owner_rank = 0;
    std::uint64_t task_id = 0;
    bool operator==(const ForwardKey&) const = default;
  };
  struct ForwardKeyHash {
    std::size_t operator()(const ForwardKey& key) const noexcept {
      return std::hash<std::uint64_t>{}(key.task_id * 0x9E3779B97F4A7C15ULL ^ key.owner_rank);
    }
  };
  std::unordered_map<ForwardKey, ForwardedTask, ForwardKeyHash> forwarded_;
  // The kWorkerDied outcome of a forwarded task whose node was lost.
  [[nodiscard]] TaskOutcome LostWithItsNode(const ForwardKey& key, const ForwardedTask& task,
                                            const std::string& cause) const;
  sched::ResourceMap available_;
  sched::GpuDevices gpus_;
  std::map<sched::ResourceMap, std::deque<TaskSpec>> queues_;
  std::size_t queued_ = 0;
  std::map<std::uint32_t, Worker> workers_;
  std::map<pid_t, std::uint32_t> worker_by_pid_;
  std::vector<std::uint32_t> idle_;
  std::uint32_t starting_ = 0;
  std::uint32_t actor_workers_ = 0;
  std::uint32_t retiring_ = 0;
  std::uint32_t ending_ = 0;
  std::uint32_t constructing_ = 0;  // workers whose front task is a constructor
  std::uint32_t next_worker_ = 0;
  // The ranks of this node's workers that ended last, not given out again
  // (StartOneWorker): as many as an owner remembers (Owner::ended_borrowers_).
  RecentIds recently_ended_{kEndedBorrowersRemembered};
  std::uint32_t deaths_before_start_ = 0;
  bool ever_registered_ = false;
  bool dirty_ = false;
  std::size_t last_broadcast_queued_ = 0;
};

}  // namespace sray::core
