#pragma once

// The node manager (Ray's raylet role): one per node. It owns the node's
// object store, schedules the tasks that reach it (local first, spilled to
// a node with free resources, refused at once when no node could ever run
// them), keeps a pool of worker processes (the job's executable re-executed
// in worker mode, reused across tasks, capped by the node's CPUs), and turns
// a worker's death into a retryable outcome for the task's owner.
//
// The decisions are LocalScheduler's (core/local_scheduler.h); this class
// carries them out and serves the node's messages.
//
// Threads: transport handlers decode and post to the manager's event loop
// (a SerialExecutor); the scheduler is touched only there. Pulls between
// nodes and spills block, so they run on a second executor. The object store
// is thread-safe on its own.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/recent_ids.h"
#include "core/actor_directory.h"
#include "core/event_log.h"
#include "core/local_scheduler.h"
#include "core/object_transfer.h"
#include "core/owner.h"
#include "core/protocol.h"
#include "core/serial_executor.h"
#include "core/store_access.h"
#include "core/task_tally.h"
#include "core/worker_output.h"
#include "object/mapped_file.h"
#include "object/object_store.h"
#include "sched/resources.h"
#include "sched/worker_processes.h"
#include "transport/address_book.h"
#include "transport/transport.h"

namespace sray::core {

struct HandlerGuard;

struct NodeManagerConfig {
  std::uint32_t node_id = 0;
  std::uint32_t rank = 0;  // this process's transport rank
  std::string hostname;
  sched::ResourceMap total;
  std::uint32_t gpu_devices = 0;
  std::uint32_t max_workers = 4;
  object::StoreConfig store;
  // How to start a worker: this executable, these arguments.
  std::string executable;
  std::vector<std::string> arguments;
  transport::JobToken secret{};
  // The head (actor directory): workers reach it directly. An empty address
  // means this process is the head.
  std::uint32_t head_rank = 0;
  transport::Bytes head_address;
  // Workers' output: a log file per worker here (empty: they share the
  // manager's output, unrecorded), and their lines in the manager's output
  // with a prefix unless log_to_driver is false.
  std::string worker_logs_directory;
  bool log_to_driver = true;
  // Where the log files are copied when the manager ends (log_dir=); empty:
  // they go with the session directory.
  std::string worker_logs_copy;
  // How the step's environment was made ready here (staged, reused, used in
  // place): the node's first event. Empty: the step has none.
  std::string environment_note;
};

class NodeManager {
 public:
  static Result<std::unique_ptr<NodeManager>> Create(
      NodeManagerConfig config, transport::Transport& transport,
      std::shared_ptr<transport::AddressBook> address_book);
  // Stops the workers, removes every object of the node, and copies the
  // workers' logs where worker_logs_copy says.
  ~NodeManager();
  NodeManager(const NodeManager&) = delete;
  NodeManager& operator=(const NodeManager&) = delete;

  [[nodiscard]] NodeDescription Description() const;
  // Node ranks and totals of the whole job; scheduling starts with it.
  void ApplyClusterView(ClusterView view);
  void Submit(TaskSpec spec);
  // Ends the process of the actor's incarnation (or drops its queued
  // constructor), for the head.
  void StopActor(ActorKill kill);
  // Passes the head's answer to a worker of this node; dropped if it is gone.
  void ForwardActorChange(const ActorChanged& changed);
  StoreAccess& store_access();
  [[nodiscard]] object::StoreUsageSnapshot StoreUsage() const;

  // Stops accepting work, ends the workers; idempotent.
  void Stop();

 private:
  class LocalStoreAccess;

  NodeManager(NodeManagerConfig config, transport::Transport& transport,
              std::shared_ptr<transport::AddressBook> address_book,
              std::unique_ptr<object::ObjectStore> store, std::shared_ptr<EventLog> events,
              std::shared_ptr<SpillEvents> spill_events);
  void RegisterHandlers();

  // Event loop only: carries out what the scheduler decided, in order.
  void Apply(SchedulerEffects effects);
  void SpawnWorker(std::uint32_t rank);
  void Route(TaskOutcome outcome);
  [[nodiscard]] NodeStatus StatusNow() const;  // event loop only
  // Blocking executor: the node's worker log files (kWorkerLogs).
  [[nodiscard]] Result<transport::Bytes> ReadWorkerLogs(const WorkerLogsRequest& request) const;
  void ReportActorCreated(const TaskOutcome& outcome);
  void ReportActorDeath(const ActorDeath& death);
  // The event loop's idle step: resource broadcasts, workers that overran
  // kRetireLimit, surplus idle workers; returns when to run again (0: when
  // woken).
  std::chrono::milliseconds OnIdle();
  std::chrono::milliseconds BroadcastIfDirty();

  // Any thread.
  std::uint32_t RankOfNode(std::uint32_t node) const;
  // MakeLocal through the transfer, refusing (and dropping) a copy of an
  // object whose owner has ended.
  Result<std::string> MakeLocalCopy(const ObjectId& id, std::uint32_t holder, std::uint64_t size);
  // Frees an actor call's result its process stored without the caller
  // hearing of it, here or on the node that holds it; once that process has
  // ended or its actor retired.
  void DiscardOrphan(const OrphanedResult& orphan);
  // Event loop only.
  void DiscardNow(const OrphanedResult& orphan);
  void ReleaseOrphans(std::uint32_t worker_rank);
  // Owners that ended (any node's workers, and whole lost nodes): their
  // objects are freed here when told (kOwnerGone, kNodeLost), and what is
  // made for them afterwards (a result of a task or an actor call still
  // running then) as soon as it is stored. Any thread.
  [[nodiscard]] bool IsGoneOwner(std::uint64_t owner) const;
  // Event loop only: tells every node manager left, this one too.
  void AnnounceOwnerGone(std::uint32_t worker_rank);
  // Event loop only: passes a process's end on to the owners on this node
  // (kBorrowerGone), the driver's included; none is the ended one.
  void PassOnBorrowerGone(const OwnerGone& gone);
  // Event loop only: the same for every process of a lost node
  // (kBorrowerNodeLost).
  void PassOnBorrowerNodeLost(const NodeLost& lost);
  // Event loop only: the same news for a worker that registers after it
  // was passed on.
  void TellOfLostNodes(std::uint32_t worker_rank);
  // Event loop only: the stored result of a task whose owner has ended.
  void FreeResultOfGoneOwner(const TaskOutcome& outcome);
  // Event loop only: a result whose owner has ended is read by nobody, so
  // the registrations its worker made for that owner with the owners of
  // the references inside (Owner::Lend) are given back.
  void GiveBackLentTo(const TaskOutcome& outcome);
  // Workers whose end was seen: a store request of theirs that the
  // transport delivers afterwards (it was in flight when the process was
  // killed) is refused, or its object would stay with nobody to free it.
  // Noted and cleared on the event loop, read on the blocking executor
  // (gone_workers_).

  const NodeManagerConfig config_;
  transport::Transport& transport_;
  std::shared_ptr<transport::AddressBook> address_book_;
  // Shared with the store's spill callback.
  const std::shared_ptr<EventLog> events_;
  const std::shared_ptr<SpillEvents> spill_events_;
  std::unique_ptr<object::ObjectStore> store_;
  std::unique_ptr<LocalStoreAccess> store_access_;
  std::atomic<bool> stopping_{false};

  // Immutable after ApplyClusterView; read from any thread.
  mutable std::mutex view_mutex_;
  std::vector<std::uint32_t> node_ranks_;

  // Event-loop state.
  LocalScheduler scheduler_;
  // The ranks of the workers that ended last (a rank is reused only after
  // 65,536 spawns on a node; in-flight requests arrive within milliseconds).
  static constexpr std::size_t kGoneWorkersKept = 4'096;
  RecentIds gone_workers_{kGoneWorkersKept};
  // Workers of any node that ended, as told by kOwnerGone (a rank is reused
  // only after 65,536 spawns on its node, and as many ends push it out of
  // here first); lost nodes, whose every process ended. Any thread.
  RecentIds gone_owners_{kGoneWorkersKept};
  mutable std::mutex lost_nodes_mutex_;
  std::set<std::uint32_t> lost_nodes_;  // guarded by lost_nodes_mutex_
  // Event loop only: discards that name a worker still alive, by its rank.
  std::unordered_map<std::uint32_t, std::vector<OrphanedResult>> orphans_of_live_workers_;
  TaskTally task_tally_;
  std::chrono::steady_clock::time_point last_broadcast_{};

  // Objects between this node's store and others (blocking; any thread).
  std::unique_ptr<TransferLinks> transfer_links_;
  std::unique_ptr<ObjectTransfer> transfer_;

  std::shared_ptr<HandlerGuard> guard_;
  // After the processes stop, what they printed last is read out.
  std::unique_ptr<WorkerOutput> worker_output_;
  std::unique_ptr<sched::WorkerProcesses> processes_;
  // Declared last: destroyed first, so no closure outlives the state above.
  // Work that waits on this node alone (store creates, spills, restores,
  // pins for other nodes' pulls, log reads).
  std::unique_ptr<SerialExecutor> blocking_;
  // Pulls from other nodes, which wait for the holder's pin: on an executor
  // of their own, so this node's answers to pins never queue behind its own
  // pull. With one executor, two nodes pulling from each other waited on
  // each other until the 60 s call timeout (chaos_check store found it).
  std::unique_ptr<SerialExecutor> pulls_;
  std::unique_ptr<SerialExecutor> loop_;
};

}  // namespace sray::core
