#pragma once

// The node manager (Ray's raylet role): one per node. It owns the node's
// object store, schedules the tasks that reach it (local first, spilled to
// a node with free resources, refused at once when no node could ever run
// them), keeps a pool of worker processes (the job's executable re-executed
// in worker mode, reused across tasks, capped by the node's CPUs), and turns
// a worker's death into a retryable outcome for the task's owner.
//
// Threads: transport handlers decode and post to the manager's event loop
// (a SerialExecutor); scheduling state is touched only there. Pulls between
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

#include "core/actor_directory.h"
#include "core/owner.h"
#include "core/protocol.h"
#include "core/serial_executor.h"
#include "core/store_access.h"
#include "object/mapped_file.h"
#include "object/object_store.h"
#include "sched/resources.h"
#include "sched/worker_processes.h"
#include "transport/address_book.h"
#include "transport/transport.h"

namespace sray::core {

struct HandlerGuard;

// Tasks a busy worker may hold beyond the one it runs: hides the round trip
// to the node manager between tasks.
inline constexpr std::size_t kTasksPipelinedPerWorker = 4;
// A node takes tasks from busy neighbours while its queue is shorter than
// this many per CPU.
inline constexpr double kQueuedPerRemoteCpu = 32;

// Transport ranks of workers a node manager starts: above every PMIx rank.
inline constexpr std::uint32_t kFirstWorkerRank = 0x40000000;
inline constexpr std::uint32_t kWorkersPerNodeLimit = 0x10000;

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
};

class NodeManager {
 public:
  static Result<std::unique_ptr<NodeManager>> Create(
      NodeManagerConfig config, transport::Transport& transport,
      std::shared_ptr<transport::AddressBook> address_book);
  // Stops the workers and removes every object of the node.
  ~NodeManager();
  NodeManager(const NodeManager&) = delete;
  NodeManager& operator=(const NodeManager&) = delete;

  // The owner living in this process (the driver's), if any: outcomes for
  // it are delivered by call instead of by message.
  void SetLocalOwner(Owner* owner);
  // The head's directory when it lives in this process (node 0): actor
  // reports go to it by call instead of by message.
  void SetLocalDirectory(ActorDirectory* directory);
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
  struct WorkerState {
    pid_t pid = 0;
    bool registered = false;
    // Tasks handed to the worker: the front one runs, the rest wait in the
    // worker (pipelined, as on a Ray worker lease). They share one grant of
    // resources, because the worker runs them one after another.
    std::deque<TaskSpec> assigned;
    sched::ResourceMap granted;
    std::vector<std::uint32_t> devices;
    // CPUs of the grant lent to other tasks while its task waits in Get.
    double lent_cpus = 0;
    // The actor it serves once its constructor succeeded (0: none); the
    // grant is then held until the process ends.
    std::uint64_t actor_id = 0;
    std::int32_t incarnation = 0;
  };

  NodeManager(NodeManagerConfig config, transport::Transport& transport,
              std::shared_ptr<transport::AddressBook> address_book,
              std::unique_ptr<object::ObjectStore> store);
  void RegisterHandlers();

  // Event loop only.
  void Schedule(TaskSpec spec);
  void Dispatch();
  void SendToWorker(std::uint32_t worker, WorkerState& state, TaskSpec task);
  void ReleaseGrant(WorkerState& state);
  void OnWorkerBlocked(std::uint32_t worker_rank, bool blocked);
  enum class ForwardTo {
    kFreeOrShortQueue,  // resources free now, or a queue shorter than the limit
    kAnyFeasible,       // any node whose totals fit (this one's do not)
  };
  bool Forward(TaskSpec& spec, ForwardTo where);
  void StartWorker();
  void OnWorkerRegistered(std::uint32_t rank);
  void OnTaskDone(std::uint32_t worker_rank, TaskOutcome outcome);
  void OnWorkerExited(pid_t pid, int wait_status);
  void OnActorCreated(std::uint32_t worker_rank, WorkerState& state, TaskOutcome outcome);
  void StopActorWorker(const ActorKill& kill);
  void ReportActorCreated(TaskOutcome outcome);
  void ReportActorDeath(const ActorDeath& death);
  void Route(TaskOutcome outcome);
  void FailQueued(OutcomeKind kind, const std::string& message);
  std::chrono::milliseconds BroadcastIfDirty();
  TaskOutcome OutcomeFor(const TaskSpec& spec, OutcomeKind kind, std::string message) const;
  std::string InfeasibleMessage(const TaskSpec& spec) const;

  // Any thread (blocking).
  Result<std::string> MakeLocal(const ObjectId& id, std::uint32_t holder, std::uint64_t size);
  Result<PullSource> PinForPull(const ObjectId& id, std::uint32_t puller_node);
  void UnpinForPull(const ObjectId& id);
  void FreeLocal(const ObjectId& id);
  std::uint32_t RankOfNode(std::uint32_t node) const;

  const NodeManagerConfig config_;
  transport::Transport& transport_;
  std::shared_ptr<transport::AddressBook> address_book_;
  std::unique_ptr<object::ObjectStore> store_;
  std::unique_ptr<LocalStoreAccess> store_access_;
  std::atomic<Owner*> local_owner_{nullptr};
  std::atomic<ActorDirectory*> local_directory_{nullptr};
  std::atomic<bool> stopping_{false};

  // Immutable after ApplyClusterView; read from any thread.
  mutable std::mutex view_mutex_;
  std::vector<std::uint32_t> node_ranks_;

  // Event-loop state.
  std::vector<NodeDescription> nodes_;
  std::vector<sched::ResourceMap> node_available_;
  std::vector<std::uint32_t> node_queued_;
  std::size_t last_broadcast_queued_ = 0;
  sched::ResourceMap available_;
  sched::GpuDevices gpus_;
  // Waiting tasks by resource shape (Ray's scheduling classes): FIFO within a
  // shape, and a shape that does not fit is skipped as a whole.
  std::map<sched::ResourceMap, std::deque<TaskSpec>> queues_;
  std::size_t queued_ = 0;
  std::map<std::uint32_t, WorkerState> workers_;
  std::map<pid_t, std::uint32_t> worker_by_pid_;
  std::vector<std::uint32_t> idle_;
  std::uint32_t starting_ = 0;
  std::uint32_t actor_workers_ = 0;
  std::uint32_t next_worker_ = 0;
  std::uint32_t deaths_before_start_ = 0;
  bool ever_registered_ = false;
  bool dirty_ = false;
  std::chrono::steady_clock::time_point last_broadcast_{};

  // Objects of this node that other nodes hold copies of, and registrations
  // of objects being pulled.
  struct PullRegistration {
    std::unique_ptr<object::MappedFile> file;
    std::unique_ptr<transport::RegisteredMemory> memory;
    int pulls = 0;
  };
  std::mutex pulls_mutex_;
  std::map<ObjectId, PullRegistration> pull_sources_;
  std::map<ObjectId, std::set<std::uint32_t>> copies_;
  std::mutex fetch_mutex_;  // one pull into this node at a time

  std::shared_ptr<HandlerGuard> guard_;
  std::unique_ptr<sched::WorkerProcesses> processes_;
  // Declared last: destroyed first, so no closure outlives the state above.
  std::unique_ptr<SerialExecutor> blocking_;
  std::unique_ptr<SerialExecutor> loop_;
};

}  // namespace sray::core
