#include "core/node_manager.h"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <shared_mutex>
#include <variant>

#include "common/host_load.h"
#include "common/host_name.h"
#include "common/log.h"
#include "common/worker_log_files.h"
#include "core/borrow_links.h"
#include "core/node_fence.h"
#include "core/worker_launch.h"
#include "core/worker_main.h"

namespace sray::core {
namespace {

transport::Bytes Empty() {
  return {};
}

}  // namespace

// Lets transport handlers outlive the manager safely: they run only while
// the guard still points at it.
struct HandlerGuard {
  std::shared_mutex mutex;
  NodeManager* manager = nullptr;
};

class NodeManager::LocalStoreAccess final : public StoreAccess {
 public:
  explicit LocalStoreAccess(NodeManager& manager) : manager_(manager) {}
  Result<std::string> Create(const ObjectId& id, std::uint64_t size,
                             std::int32_t incarnation) override {
    auto path = manager_.store_->Create(
        id, size, true, {.rank = manager_.transport_.rank(), .incarnation = incarnation});
    if (!path.ok()) return path.status();
    return path->string();
  }
  // In this process: sealed before it returns, whatever `wait` asks.
  Status Seal(const ObjectId& id, std::uint64_t /*size*/, std::int32_t incarnation,
              SealWait /*wait*/) override {
    return manager_.store_->SealMadeBy(
        id, {.rank = manager_.transport_.rank(), .incarnation = incarnation});
  }
  Result<std::string> MakeLocal(const ObjectId& id, std::uint32_t holder,
                                std::uint64_t size) override {
    return manager_.MakeLocalCopy(id, holder, size);
  }
  void Free(const ObjectId& id, std::uint32_t holder) override {
    if (holder == manager_.config_.node_id) {
      manager_.transfer_->FreeLocal(id);
      return;
    }
    manager_.transport_.Post(manager_.RankOfNode(holder), kFreeObject,
                             Encode(FreeObject{.id = id, .node = holder}));
  }
  void DiscardOrphan(const OrphanedResult& orphan) override { manager_.DiscardOrphan(orphan); }

 private:
  NodeManager& manager_;
};

// TransferLinks over the transport: calls and posts to other node managers,
// RMA reads of what they registered.
class TransportTransferLinks final : public TransferLinks {
 public:
  TransportTransferLinks(transport::Transport& transport,
                         std::function<std::uint32_t(std::uint32_t)> rank_of_node)
      : transport_(transport), rank_of_node_(std::move(rank_of_node)) {}

  Result<Registration> Register(void* address, std::size_t length,
                                const std::filesystem::path& file) override {
    auto memory = transport_.Register(
        address, length, transport::SharedFileRegion{.path = file.string(), .offset = 0});
    if (!memory.ok()) return memory.status();
    Registration registration;
    registration.packed_key = std::string(transport::TextOf((*memory)->packed_key()));
    registration.handle = std::shared_ptr<transport::RegisteredMemory>(std::move(memory).value());
    return registration;
  }
  Result<PullSource> Pin(std::uint32_t holder_node, const ObjectRequest& request) override {
    const std::uint32_t rank = rank_of_node_(holder_node);
    auto reply = transport_.Call(rank, kPinForPull, Encode(request));
    if (!reply.ok() && transport_.PeerFailed(rank)) {
      // The holder's node is gone (the transport marks a peer failed for
      // good, unlike a call that only timed out): the object is lost, which
      // lets its owner rebuild it from lineage or say so (ObjectLostError).
      return Status::NotFound("object " + request.id.ToString() + " was on node " +
                              std::to_string(holder_node) + ", which is lost: " + reply.status().message());
    }
    if (!reply.ok()) return reply.status();
    return Decode<PullSource>(*reply, "pull source");
  }
  void Unpin(std::uint32_t holder_node, const ObjectRequest& request) override {
    transport_.Post(rank_of_node_(holder_node), kUnpinForPull, Encode(request));
  }
  Status Pull(std::uint32_t holder_node, const PullSource& source, void* destination,
              std::shared_ptr<void> destination_owner) override {
    return transport_.Pull(rank_of_node_(holder_node), source.address,
                           transport::BytesOf(source.key), destination, source.size,
                           std::chrono::minutes(10), std::move(destination_owner));
  }
  void FreeCopy(std::uint32_t node, const ObjectId& id) override {
    transport_.Post(rank_of_node_(node), kFreeObject, Encode(FreeObject{.id = id, .node = node}));
  }

 private:
  transport::Transport& transport_;
  std::function<std::uint32_t(std::uint32_t)> rank_of_node_;
};

Result<std::unique_ptr<NodeManager>> NodeManager::Create(
    NodeManagerConfig config, transport::Transport& transport,
    std::shared_ptr<transport::AddressBook> address_book) {
  auto events = std::make_shared<EventLog>();
  if (!config.environment_note.empty()) {
    events->Add("env_staged", "node " + std::to_string(config.node_id) + ": " +
                                  config.environment_note);
  }
  auto spill_events = std::make_shared<SpillEvents>(config.node_id, events);
  config.store.on_spilled = [spill_events](std::uint64_t bytes) { spill_events->Spilled(bytes); };
  auto store = object::ObjectStore::Open(config.store);
  if (!store.ok()) return store.status();
  std::unique_ptr<NodeManager> manager(
      new NodeManager(std::move(config), transport, std::move(address_book),
                      std::move(store).value(), std::move(events), std::move(spill_events)));
  NodeManager* raw = manager.get();
  auto processes = sched::WorkerProcesses::Create([raw](pid_t pid, int wait_status) {
    if (raw->stopping_.load()) return;
    raw->loop_->Post([raw, pid, wait_status] {
      const std::string how = sched::DescribeWaitStatus(wait_status);
      raw->events_->Add("worker_exited", "worker process " + std::to_string(pid) + " of node " +
                                             std::to_string(raw->config_.node_id) +
                                             " ended: " + how);
      raw->Apply(raw->scheduler_.OnWorkerExited(pid, how));
    });
  });
  if (!processes.ok()) return processes.status();
  manager->processes_ = std::move(processes).value();
  if (!manager->config_.worker_logs_directory.empty()) {
    auto output = WorkerOutput::Start({.directory = manager->config_.worker_logs_directory,
                                       .node_id = manager->config_.node_id,
                                       .to_driver = manager->config_.log_to_driver,
                                       .file_limit = std::uint64_t{8} << 20,
                                       .driver_stdout = STDOUT_FILENO,
                                       .driver_stderr = STDERR_FILENO,
                                       .kept_in = manager->config_.worker_logs_copy});
    if (!output.ok()) return output.status();
    manager->worker_output_ = std::move(output).value();
  }
  manager->RegisterHandlers();
  return manager;
}

NodeManager::NodeManager(NodeManagerConfig config, transport::Transport& transport,
                         std::shared_ptr<transport::AddressBook> address_book,
                         std::unique_ptr<object::ObjectStore> store,
                         std::shared_ptr<EventLog> events,
                         std::shared_ptr<SpillEvents> spill_events)
    : config_(std::move(config)),
      transport_(transport),
      address_book_(std::move(address_book)),
      events_(std::move(events)),
      spill_events_(std::move(spill_events)),
      store_(std::move(store)),
      scheduler_(LocalSchedulerConfig{.node_id = config_.node_id,
                                      .total = config_.total,
                                      .gpu_devices = config_.gpu_devices,
                                      .max_workers = config_.max_workers}) {
  store_access_ = std::make_unique<LocalStoreAccess>(*this);
  transfer_links_ = std::make_unique<TransportTransferLinks>(
      transport_, [this](std::uint32_t node) { return RankOfNode(node); });
  transfer_ = std::make_unique<ObjectTransfer>(config_.node_id, *store_, *transfer_links_);
  blocking_ = std::make_unique<SerialExecutor>();
  pulls_ = std::make_unique<SerialExecutor>();
  loop_ = std::make_unique<SerialExecutor>([this] { return OnIdle(); });
}

NodeManager::~NodeManager() {
  Stop();
  processes_.reset();
  // Every line the workers printed is in the files once the reader ends.
  worker_output_.reset();
  if (!config_.worker_logs_copy.empty() && !config_.worker_logs_directory.empty()) {
    const Status copied = CopyWorkerLogs(config_.worker_logs_directory, config_.worker_logs_copy);
    if (!copied.ok()) {
      std::fprintf(stderr,
                   "sray: node %u: the workers' logs were not copied to %s (log_dir): %s; check "
                   "that the directory exists and the job user may write there\n",
                   config_.node_id, config_.worker_logs_copy.c_str(), copied.message().c_str());
    }
  }
}

void NodeManager::Stop() {
  if (stopping_.exchange(true)) return;
  if (guard_) {
    std::unique_lock lock(guard_->mutex);
    guard_->manager = nullptr;
  }
  processes_->StopAll();
  loop_->Stop();
  blocking_->Stop();
  pulls_->Stop();
  transfer_->Clear();
}

StoreAccess& NodeManager::store_access() {
  return *store_access_;
}

object::StoreUsageSnapshot NodeManager::StoreUsage() const {
  return store_->Usage();
}

NodeDescription NodeManager::Description() const {
  return NodeDescription{.node_id = config_.node_id,
                         .rank = config_.rank,
                         .hostname = config_.hostname,
                         .total = config_.total,
                         .store_capacity = config_.store.capacity};
}

void NodeManager::ApplyClusterView(ClusterView view) {
  {
    std::lock_guard lock(view_mutex_);
    node_ranks_.clear();
    for (const auto& node : view.nodes) node_ranks_.push_back(node.rank);
  }
  loop_->Post([this, view = std::move(view)]() mutable {
    Apply(scheduler_.ApplyClusterView(std::move(view.nodes)));
  });
}

std::uint32_t NodeManager::RankOfNode(std::uint32_t node) const {
  std::lock_guard lock(view_mutex_);
  return node < node_ranks_.size() ? node_ranks_[node] : 0;
}

void NodeManager::Submit(TaskSpec spec) {
  if (stopping_.load()) return;
  loop_->RunHereOrPost(
      [this, spec = std::move(spec)]() mutable { Apply(scheduler_.Submit(std::move(spec))); });
}

void NodeManager::StopActor(ActorKill kill) {
  loop_->Post([this, kill] { Apply(scheduler_.StopActor(kill)); });
}

void NodeManager::ForwardActorChange(const ActorChanged& changed) {
  transport_.Post(changed.caller_rank, kActorChanged, Encode(changed));
}

namespace {

// The node manager's side of a message: `Message` decoded (an undecodable
// payload is dropped, or answered with the decode error for requests), then
// `work` run with the manager, only while it exists (HandlerGuard).
template <typename Message, typename Work>
void ServeOneWay(transport::Transport& transport, const std::shared_ptr<HandlerGuard>& guard,
                 std::uint32_t method, const char* what, Work work) {
  transport.RegisterOneWayHandler(
      method, [guard, what, work = std::move(work)](std::uint32_t source,
                                                    std::span<const std::byte> payload) {
        auto message = Decode<Message>(payload, what);
        if (!message.ok()) return;
        std::shared_lock lock(guard->mutex);
        if (guard->manager != nullptr) work(*guard->manager, source, std::move(message).value());
      });
}

// A one-way message whose method is all it says.
template <typename Work>
void ServeSignal(transport::Transport& transport, const std::shared_ptr<HandlerGuard>& guard,
                 std::uint32_t method, Work work) {
  transport.RegisterOneWayHandler(
      method, [guard, work = std::move(work)](std::uint32_t source, std::span<const std::byte>) {
        std::shared_lock lock(guard->mutex);
        if (guard->manager != nullptr) work(*guard->manager, source);
      });
}

// A request answered at once by `answer(manager, source, message)`.
template <typename Message, typename Answer>
void ServeRequest(transport::Transport& transport, const std::shared_ptr<HandlerGuard>& guard,
                  std::uint32_t method, const char* what, Answer answer) {
  transport.RegisterRequestHandler(
      method,
      [guard, what, answer = std::move(answer)](
          std::uint32_t source, std::span<const std::byte> payload) -> Result<transport::Bytes> {
        auto message = Decode<Message>(payload, what);
        if (!message.ok()) return message.status();
        std::shared_lock lock(guard->mutex);
        if (guard->manager == nullptr) {
          return Status::Unavailable("the node manager is stopping");
        }
        return answer(*guard->manager, source, std::move(message).value());
      });
}

}  // namespace

Result<transport::Bytes> NodeManager::ReadWorkerLogs(const WorkerLogsRequest& request) const {
  if (config_.worker_logs_directory.empty()) {
    return Status::NotFound("workers' output is not kept on node " +
                            std::to_string(config_.node_id));
  }
  WorkerLogs logs;
  if (request.worker == 0) {
    for (const auto& file : ListWorkerLogs(config_.worker_logs_directory)) {
      logs.files.push_back({.worker = file.rank, .size = file.size});
    }
    return Encode(logs);
  }
  auto chunk = ReadWorkerLog(config_.worker_logs_directory, request.worker, request.offset,
                             std::min<std::uint64_t>(request.max_bytes, 1 << 20));
  if (!chunk.ok()) return chunk.status();
  logs.offset = chunk->offset;
  logs.size = chunk->size;
  logs.data = std::move(chunk->data);
  return Encode(logs);
}

NodeStatus NodeManager::StatusNow() const {
  spill_events_->Flush();
  const auto snapshot = store_->Usage();
  const HostLoad load = ReadHostLoad();
  std::uint64_t resident = ResidentBytes(::getpid());
  for (const pid_t worker : processes_->Running()) resident += ResidentBytes(worker);
  return NodeStatus{.node_id = config_.node_id,
                    .hostname = config_.hostname,
                    .total = config_.total,
                    .available = scheduler_.available(),
                    .queued = scheduler_.queued(),
                    .workers = scheduler_.workers(),
                    .store = {.capacity = snapshot.capacity,
                              .in_memory = snapshot.in_memory,
                              .spilled = snapshot.spilled,
                              .objects = snapshot.objects},
                    .events = events_->Recent(),
                    .tasks = task_tally_.With(scheduler_.CurrentTasks()),
                    .load_average_1m = load.load_average_1m,
                    .memory_total = load.memory_total_bytes,
                    .memory_available = load.memory_available_bytes,
                    .resident = resident};
}

void NodeManager::RegisterHandlers() {
  guard_ = std::make_shared<HandlerGuard>();
  guard_->manager = this;
  transport::Transport& transport = transport_;
  const auto& guard = guard_;

  ServeOneWay<TaskSpec>(
      transport, guard, kSubmitTask, "task",
      [](NodeManager& manager, std::uint32_t, TaskSpec spec) { manager.Submit(std::move(spec)); });
  ServeOneWay<TaskOutcome>(
      transport, guard, kTaskDone, "task outcome",
      [](NodeManager& manager, std::uint32_t source, TaskOutcome outcome) {
        manager.loop_->RunHereOrPost([&manager, source, outcome = std::move(outcome)]() mutable {
          manager.Apply(manager.scheduler_.OnTaskDone(source, std::move(outcome)));
        });
      });
  ServeOneWay<ActorCallTally>(transport, guard, kActorCallTally, "actor call tally",
                              [](NodeManager& manager, std::uint32_t, ActorCallTally tally) {
                                manager.loop_->RunHereOrPost([&manager, tally = std::move(tally)]() mutable {
                                  manager.task_tally_.RecordActorCalls(std::move(tally));
                                });
                              });
  for (const std::uint32_t method : {kWorkerBlocked, kWorkerUnblocked}) {
    ServeSignal(transport, guard, method, [method](NodeManager& manager, std::uint32_t source) {
      manager.loop_->Post([&manager, source, method] {
        manager.Apply(manager.scheduler_.OnWorkerBlocked(source, method == kWorkerBlocked));
      });
    });
  }
  ServeOneWay<TaskOutcome>(
      transport, guard, kTaskOutcome, "task outcome",
      [](NodeManager& manager, std::uint32_t, TaskOutcome outcome) {
        manager.loop_->RunHereOrPost([&manager, outcome = std::move(outcome)]() mutable {
          manager.Route(std::move(outcome));
        });
      });
  ServeOneWay<TaskMoved>(transport, guard, kTaskMoved, "task moved",
                         [](NodeManager& manager, std::uint32_t, TaskMoved moved) {
                           manager.loop_->RunHereOrPost([&manager, moved] {
                             manager.Apply(manager.scheduler_.OnTaskMoved(moved));
                           });
                         });
  ServeOneWay<OwnerGone>(
      transport, guard, kOwnerGone, "owner gone",
      [](NodeManager& manager, std::uint32_t source, OwnerGone gone) {
        // Only a node manager sees its own workers end.
        const std::optional<std::uint32_t> node = NodeOfWorkerRank(gone.rank);
        if (!node || manager.RankOfNode(*node) != source) return;
        manager.gone_owners_.Add(gone.rank);
        // Added when a result held one of its objects (GiveBackLentTo); its
        // own node's workers leave the book when they end.
        if (*node != manager.config_.node_id) manager.address_book_->Remove(gone.rank);
        manager.loop_->RunHereOrPost([&manager, gone] { manager.PassOnBorrowerGone(gone); });
        // Behind the store requests already queued (a Create for it).
        manager.blocking_->Post([&manager, rank = gone.rank] {
          manager.transfer_->FreeOwnedBy([rank](std::uint64_t owner) { return owner == rank; });
        });
      });
  ServeOneWay<NodeLost>(transport, guard, kNodeLost, "node lost",
                        [](NodeManager& manager, std::uint32_t source, NodeLost lost) {
                          if (source != manager.config_.head_rank) return;  // the head decides
                          FenceLostNode(manager.transport_, lost);
                          {
                            std::lock_guard lock(manager.lost_nodes_mutex_);
                            manager.lost_nodes_.insert(lost.node);
                          }
                          // Every worker of that node owned its objects; its
                          // pulls will never unpin what they pinned here.
                          manager.blocking_->Post([&manager, node = lost.node] {
                            manager.transfer_->FreeOwnedBy([&manager](std::uint64_t owner) {
                              return manager.IsGoneOwner(owner);
                            });
                            manager.transfer_->ForgetPuller(node);
                          });
                          manager.loop_->Post([&manager, lost = std::move(lost)] {
                            manager.Apply(manager.scheduler_.OnNodeLost(lost.node, lost.cause));
                            manager.PassOnBorrowerNodeLost(lost);
                          });
                        });
  ServeOneWay<ActorKill>(
      transport, guard, kStopActorWorker, "actor stop",
      [](NodeManager& manager, std::uint32_t, ActorKill kill) { manager.StopActor(kill); });
  ServeOneWay<ActorKill>(
      transport, guard, kActorRetired, "actor retired",
      [](NodeManager& manager, std::uint32_t source, ActorKill retired) {
        manager.loop_->RunHereOrPost([&manager, source, retired] {
          manager.Apply(manager.scheduler_.OnActorRetired(source, retired));
          // The retired incarnation runs nothing more.
          manager.ReleaseOrphans(source);
        });
      });
  ServeOneWay<WorkerEndReply>(
      transport, guard, kWorkerEndReply, "worker's answer to ending",
      [](NodeManager& manager, std::uint32_t source, WorkerEndReply reply) {
        // Only from a worker of this node asked to end (the scheduler checks).
        manager.loop_->RunHereOrPost([&manager, source, reply] {
          manager.Apply(manager.scheduler_.OnWorkerEndReply(source, reply.owned_objects));
        });
      });
  ServeOneWay<ActorChanged>(transport, guard, kActorChanged, "actor change",
                            [](NodeManager& manager, std::uint32_t, const ActorChanged& changed) {
                              manager.ForwardActorChange(changed);
                            });
  ServeOneWay<ResourceUpdate>(
      transport, guard, kResourceUpdate, "resource update",
      [](NodeManager& manager, std::uint32_t, ResourceUpdate update) {
        manager.loop_->RunHereOrPost([&manager, update = std::move(update)] {
          manager.Apply(manager.scheduler_.OnResourceUpdate(update));
        });
      });
  ServeRequest<WorkerRegistration>(
      transport, guard, kRegisterWorker, "worker registration",
      [](NodeManager& manager, std::uint32_t,
         const WorkerRegistration& registration) -> Result<transport::Bytes> {
        manager.address_book_->Add(
            registration.rank,
            {.address = transport::BytesOf(registration.address),
             .pid = static_cast<pid_t>(registration.pid),
             .description = "worker " + std::to_string(registration.rank - kFirstWorkerRank) +
                            " (pid " + std::to_string(registration.pid) + ") of node " +
                            std::to_string(manager.config_.node_id)});
        const std::uint32_t rank = registration.rank;
        manager.loop_->Post([&manager, rank] {
          manager.Apply(manager.scheduler_.OnWorkerRegistered(rank));
          manager.TellOfLostNodes(rank);
        });
        return Empty();
      });
  // Log files are read on the blocking executor.
  transport.RegisterDeferredRequestHandler(
      kWorkerLogs, [guard](std::uint32_t, auto payload, const transport::Responder& responder) {
        auto request = Decode<WorkerLogsRequest>(payload, "worker logs request");
        if (!request.ok()) return responder.Reply(request.status());
        std::shared_lock lock(guard->mutex);
        if (guard->manager == nullptr) return;
        NodeManager& manager = *guard->manager;
        manager.blocking_->Post([&manager, request = *request, responder] {
          responder.Reply(manager.ReadWorkerLogs(request));
        });
      });
  // Object requests that block (spills, restores, pulls) are answered from
  // the blocking executor or, for pulls from another node, the pulls
  // executor; never from the progress thread.
  auto serve_on = [&transport, &guard](std::unique_ptr<SerialExecutor> NodeManager::*executor,
                                       std::uint32_t method, auto answer) {
    transport.RegisterDeferredRequestHandler(
        method, [guard, executor, answer](std::uint32_t sender, auto payload,
                                          const transport::Responder& responder) {
          auto request = Decode<ObjectRequest>(payload, "object request");
          if (!request.ok()) return responder.Reply(request.status());
          std::shared_lock lock(guard->mutex);
          if (guard->manager == nullptr) return;  // dropped: the caller hears at once
          NodeManager& manager = *guard->manager;
          (manager.*executor)->Post([&manager, sender, request = *request, responder, answer] {
            responder.Reply(answer(manager, sender, request));
          });
        });
  };
  auto serve_blocking = [&serve_on](std::uint32_t method, auto answer) {
    serve_on(&NodeManager::blocking_, method, answer);
  };
  serve_blocking(kCreateObject,
                 [](NodeManager& manager, std::uint32_t sender,
                    const ObjectRequest& request) -> Result<transport::Bytes> {
                   // A request that reaches us after its process's end was
                   // seen: nobody would write, seal or free the object (the
                   // discards for that process are already done).
                   if (manager.gone_workers_.Contains(sender)) {
                     return Status::Unavailable("sray: process of rank " + std::to_string(sender) +
                                                " has ended: its object is not created");
                   }
                   auto path =
                       manager.store_->Create(request.id, request.size, true,
                                              {.rank = sender, .incarnation = request.incarnation});
                   if (!path.ok()) return path.status();
                   return Encode(ObjectPath{.path = path->string(), .size = request.size});
                 });
  serve_on(&NodeManager::pulls_, kMakeLocal,
           [](NodeManager& manager, std::uint32_t,
              const ObjectRequest& request) -> Result<transport::Bytes> {
             auto path = manager.MakeLocalCopy(request.id, request.holder_node, request.size);
             if (!path.ok()) return path.status();
             return Encode(ObjectPath{.path = *path, .size = request.size});
           });
  serve_blocking(kPinForPull,
                 [](NodeManager& manager, std::uint32_t,
                    const ObjectRequest& request) -> Result<transport::Bytes> {
                   auto source =
                       manager.transfer_->PinForPull(request.id, request.puller_node, request.pull);
                   if (!source.ok()) return source.status();
                   return Encode(*source);
                 });
  // On the transport's thread, in the order it arrives: before the outcome
  // the worker posts after it.
  ServeOneWay<ObjectRequest>(
      transport, guard, kSealObject, "object request",
      [](NodeManager& manager, std::uint32_t sender, const ObjectRequest& request) {
        const Status sealed = manager.store_->SealMadeBy(
            request.id, {.rank = sender, .incarnation = request.incarnation});
        if (!sealed.ok()) Log(LogLevel::kDebug, "seal ignored: " + sealed.message());
      });
  // On the blocking executor, behind the process's Create (and away from the
  // transport's thread: the store's lock is held while it spills).
  serve_blocking(
      kSealObjectAndAnswer,
      [](NodeManager& manager, std::uint32_t sender,
         const ObjectRequest& request) -> Result<transport::Bytes> {
        const object::ObjectMaker maker{.rank = sender, .incarnation = request.incarnation};
        if (manager.IsGoneOwner(request.id.owner)) {
          // An actor call's result for a caller that has ended: nobody
          // will read it, and its owner's frees are done already.
          manager.store_->DiscardOrphan(request.id, maker);
          return Status::NotFound("object " + request.id.ToString() +
                                  " is not kept: its owner (rank " +
                                  std::to_string(request.id.owner) + ") has ended");
        }
        SRAY_RETURN_IF_ERROR(manager.store_->SealMadeBy(request.id, maker));
        return transport::Bytes{};
      });
  ServeOneWay<FreeObject>(transport, guard, kFreeObject, "free",
                          [](NodeManager& manager, std::uint32_t, const FreeObject& request) {
                            if (request.node == manager.config_.node_id) {
                              manager.transfer_->FreeLocal(request.id);
                              return;
                            }
                            manager.transport_.Post(manager.RankOfNode(request.node), kFreeObject,
                                                    Encode(request));
                          });
  ServeOneWay<OrphanedResult>(transport, guard, kDiscardOrphan, "orphaned result",
                              [](NodeManager& manager, std::uint32_t,
                                 const OrphanedResult& orphan) { manager.DiscardOrphan(orphan); });
  ServeOneWay<ObjectRequest>(transport, guard, kUnpinForPull, "unpin",
                             [](NodeManager& manager, std::uint32_t, const ObjectRequest& request) {
                               manager.transfer_->UnpinForPull(request.id, request.puller_node,
                                                               request.pull);
                             });
  // Answered from the event loop, where the scheduler's state lives.
  transport.RegisterDeferredRequestHandler(kNodeStatus, [guard](std::uint32_t, auto,
                                                                transport::Responder responder) {
    std::shared_lock lock(guard->mutex);
    if (guard->manager == nullptr) {
      responder.Reply(Status::Unavailable("the node manager is stopping"));
      return;
    }
    NodeManager* manager = guard->manager;
    manager->loop_->Post([manager, responder] { responder.Reply(Encode(manager->StatusNow())); });
  });
  transport.RegisterRequestHandler(kStoreUsage,
                                   [guard](std::uint32_t, auto) -> Result<transport::Bytes> {
                                     core::StoreUsage usage;
                                     std::shared_lock lock(guard->mutex);
                                     if (guard->manager != nullptr) {
                                       const auto snapshot = guard->manager->store_->Usage();
                                       usage = {.capacity = snapshot.capacity,
                                                .in_memory = snapshot.in_memory,
                                                .spilled = snapshot.spilled,
                                                .objects = snapshot.objects};
                                     }
                                     return Encode(usage);
                                   });
}

// ---- carrying out the scheduler's decisions (event loop) ----

namespace {
template <typename... Visitors>
struct Overloaded : Visitors... {
  using Visitors::operator()...;
};
template <typename... Visitors>
Overloaded(Visitors...) -> Overloaded<Visitors...>;
}  // namespace

void NodeManager::Apply(SchedulerEffects effects) {
  // While stopping, nothing new starts (no task sent, moved or given a new
  // worker), but outcomes and actor reports still go out.
  const bool stopping = stopping_.load();
  for (auto& effect : effects) {
    if (stopping && (std::holds_alternative<effects::RunOnWorker>(effect) ||
                     std::holds_alternative<effects::ForwardToNode>(effect) ||
                     std::holds_alternative<effects::TellTaskMoved>(effect) ||
                     std::holds_alternative<effects::StartWorker>(effect))) {
      continue;
    }
    std::visit(
        Overloaded{
            [&](effects::RunOnWorker& run) {
              // If the worker is dying, its exit (seen through its pidfd)
              // hands the assigned tasks back.
              transport_.Post(run.worker, kExecuteTask, Encode(run.task));
            },
            [&](effects::ForwardToNode& forward) {
              transport_.Post(forward.node_rank, kSubmitTask, Encode(forward.task));
            },
            [&](effects::DeliverOutcome& deliver) {
              task_tally_.Record(deliver.outcome);
              Route(std::move(deliver.outcome));
            },
            [&](effects::ActorReady& ready) {
              task_tally_.Record(ready.outcome);
              if (auto entry = address_book_->Find(ready.outcome.worker_rank)) {
                ready.outcome.worker_address = std::string(transport::TextOf(entry->address));
              }
              ready.outcome.hostname = HostName();
              ReportActorCreated(ready.outcome);
            },
            [&](effects::ActorProcessDied& died) { ReportActorDeath(died.death); },
            [&](effects::StartWorker& start) {
              gone_workers_.Remove(start.rank);
              gone_owners_.Remove(start.rank);
              SpawnWorker(start.rank);
            },
            [&](effects::KillWorker& kill) { processes_->Kill(kill.pid, SIGKILL); },
            [&](effects::AskWorkerToEnd& ask) { transport_.Post(ask.worker, kMayWorkerEnd, {}); },
            [&](effects::RetireActor& retire) {
              transport_.Post(retire.worker, kRetireActor, Encode(retire.kill));
            },
            [&](effects::ForgetWorker& forget) {
              address_book_->Remove(forget.rank);
              transport_.NotePeerGone();
              gone_workers_.Add(forget.rank);
              ReleaseOrphans(forget.rank);
              AnnounceOwnerGone(forget.rank);
            },
            [&](effects::TellTaskMoved& tell) {
              transport_.Post(RankOfNode(tell.owner_node), kTaskMoved, Encode(tell.moved));
            },
            [&](effects::DiscardResult& discard) {
              // On the blocking executor, behind any store request the
              // dead worker sent before it died, and before any Create
              // of a retry here. Only a primary entry: a copy pulled
              // from the retry's node meanwhile stays.
              blocking_->Post([this, id = discard.id] { store_->DiscardPrimary(id); });
            },
        },
        effect);
  }
}

void NodeManager::DiscardOrphan(const OrphanedResult& orphan) {
  if (orphan.node != config_.node_id) {
    transport_.Post(RankOfNode(orphan.node), kDiscardOrphan, Encode(orphan));
    return;
  }
  loop_->Post([this, orphan] {
    // A process that still serves that incarnation may still be storing
    // the result (a Kill reports the death before the process ends): it
    // waits until the process ends or the incarnation retires
    // (ReleaseOrphans).
    if (scheduler_.ServesActor(orphan.made_by, orphan.actor_id, orphan.incarnation)) {
      orphans_of_live_workers_[orphan.made_by].push_back(orphan);
      return;
    }
    DiscardNow(orphan);
  });
}

void NodeManager::DiscardNow(const OrphanedResult& orphan) {
  // Behind any Create the process sent (the blocking executor serves them
  // in order). Only the entry of that very attempt goes.
  blocking_->Post([this, orphan] {
    store_->DiscardOrphan(orphan.id, {.rank = orphan.made_by, .incarnation = orphan.incarnation});
  });
}

Result<std::string> NodeManager::MakeLocalCopy(const ObjectId& id, std::uint32_t holder,
                                               std::uint64_t size) {
  auto path = transfer_->MakeLocal(id, holder, size);
  // A pull that began before this node heard that the object's owner ended
  // would leave a copy nobody frees.
  if (path.ok() && IsGoneOwner(id.owner)) {
    store_->Free(id);
    return Status::NotFound("object " + id.ToString() + " is gone: its owner (rank " +
                            std::to_string(id.owner) + ") has ended");
  }
  return path;
}

bool NodeManager::IsGoneOwner(std::uint64_t owner) const {
  const std::optional<std::uint32_t> node = NodeOfWorkerRank(owner);
  if (!node) return false;  // the driver, node managers: the job ends with them
  if (gone_owners_.Contains(owner)) return true;
  std::lock_guard lock(lost_nodes_mutex_);
  return lost_nodes_.contains(*node);
}

void NodeManager::AnnounceOwnerGone(std::uint32_t worker_rank) {
  const transport::Bytes message = Encode(OwnerGone{.rank = worker_rank});
  for (const auto& node : scheduler_.nodes()) {
    if (!scheduler_.IsLost(node.node_id)) transport_.Post(node.rank, kOwnerGone, message);
  }
}

void NodeManager::PassOnBorrowerGone(const OwnerGone& gone) {
  const transport::Bytes message = Encode(gone);
  // To this process too: where it holds the driver, its owner serves the
  // message; elsewhere nothing is registered for it and it is dropped.
  transport_.Post(config_.rank, kBorrowerGone, message);
  for (const std::uint32_t worker : scheduler_.RegisteredWorkers()) {
    if (worker != gone.rank) transport_.Post(worker, kBorrowerGone, message);
  }
}

void NodeManager::PassOnBorrowerNodeLost(const NodeLost& lost) {
  const transport::Bytes message = Encode(lost);
  transport_.Post(config_.rank, kBorrowerNodeLost, message);
  for (const std::uint32_t worker : scheduler_.RegisteredWorkers()) {
    transport_.Post(worker, kBorrowerNodeLost, message);
  }
}

void NodeManager::TellOfLostNodes(std::uint32_t worker_rank) {
  std::vector<std::uint32_t> lost;
  {
    std::lock_guard lock(lost_nodes_mutex_);
    lost.assign(lost_nodes_.begin(), lost_nodes_.end());
  }
  for (const std::uint32_t node : lost) {
    const auto& nodes = scheduler_.nodes();
    const std::uint32_t rank = node < nodes.size() ? nodes[node].rank : 0;
    transport_.Post(
        worker_rank, kBorrowerNodeLost,
        Encode(NodeLost{.node = node, .cause = "lost before this worker started", .rank = rank}));
  }
}

void NodeManager::GiveBackLentTo(const TaskOutcome& outcome) {
  for (const ContainedRef& reference : outcome.contained) {
    const auto owner = static_cast<std::uint32_t>(reference.id.owner);
    // The gone owner's own objects went with it.
    if (owner == outcome.owner_rank || IsGoneOwner(owner)) continue;
    NoteOwnerAddress(*address_book_, config_.rank, reference);
    transport_.Post(
        owner, kRemoveBorrower,
        Encode(BorrowerChange{.id = reference.id, .borrower = outcome.owner_rank, .count = 1}));
  }
}

void NodeManager::FreeResultOfGoneOwner(const TaskOutcome& outcome) {
  if (outcome.node == config_.node_id) {
    blocking_->Post([this, id = outcome.return_id] { transfer_->FreeLocal(id); });
    return;
  }
  if (scheduler_.IsLost(outcome.node)) return;
  transport_.Post(RankOfNode(outcome.node), kFreeObject,
                  Encode(FreeObject{.id = outcome.return_id, .node = outcome.node}));
}

void NodeManager::ReleaseOrphans(std::uint32_t worker_rank) {
  auto found = orphans_of_live_workers_.find(worker_rank);
  if (found == orphans_of_live_workers_.end()) return;
  const std::vector<OrphanedResult> orphans = std::move(found->second);
  orphans_of_live_workers_.erase(found);
  for (const auto& orphan : orphans) DiscardNow(orphan);
}

void NodeManager::SpawnWorker(std::uint32_t rank) {
  auto address = transport_.LocalAddress(false);
  if (!address.ok()) {
    Apply(scheduler_.OnWorkerSpawnFailed(rank, address.status().message()));
    return;
  }
  std::vector<std::string> inherited;
  for (char** variable = environ; *variable != nullptr; ++variable) {
    inherited.emplace_back(*variable);
  }
  const WorkerLaunch launch{
      .rank = rank,
      .manager_rank = config_.rank,
      .manager_address = *address,
      .head_rank = config_.head_rank,
      .head_address = config_.head_address.empty() ? *address : config_.head_address,
      .secret = config_.secret,
      .parent = ::getpid()};
  std::optional<WorkerOutput::Pipes> pipes;
  if (worker_output_) {
    auto opened = worker_output_->Open(rank);
    if (!opened.ok()) {
      Apply(scheduler_.OnWorkerSpawnFailed(rank, opened.status().message()));
      return;
    }
    pipes = *opened;
  }
  auto pid = processes_->Spawn(
      config_.executable, config_.arguments, WorkerEnvironment(launch, inherited),
      pipes ? sched::SpawnOutput{.stdout_fd = pipes->stdout_fd, .stderr_fd = pipes->stderr_fd}
            : sched::SpawnOutput{});
  if (pipes) worker_output_->Started(rank, *pipes, pid.ok() ? *pid : 0);
  if (!pid.ok()) {
    Apply(scheduler_.OnWorkerSpawnFailed(rank, pid.status().message()));
    return;
  }
  Apply(scheduler_.OnWorkerSpawned(rank, *pid));
}

// By message, also on node 0 where the head lives in this process: the
// transport delivers posts to its own rank.
void NodeManager::ReportActorCreated(const TaskOutcome& outcome) {
  transport_.Post(config_.head_rank, kActorCreated, Encode(outcome));
}

void NodeManager::ReportActorDeath(const ActorDeath& death) {
  task_tally_.ActorEnded(death.id, death.incarnation);
  transport_.Post(config_.head_rank, kActorWorkerDied, Encode(death));
}

void NodeManager::Route(TaskOutcome outcome) {
  // Actor calls never pass through here: an actor's outcome is its constructor's.
  if (outcome.actor_id != 0) {
    ReportActorCreated(outcome);
    return;
  }
  // The owner's node manager decides: it tracks the task (OnOutcomeRouted),
  // and it hears of the owner's end first (it announces it).
  if (outcome.owner_node != config_.node_id && !scheduler_.IsLost(outcome.owner_node)) {
    transport_.Post(RankOfNode(outcome.owner_node), kTaskOutcome, Encode(outcome));
    return;
  }
  if (outcome.owner_node == config_.node_id) scheduler_.OnOutcomeRouted(outcome);
  if (IsGoneOwner(outcome.owner_rank)) {
    // Nobody will read it: its value, and the registrations the worker made
    // for the owner with the owners of the references inside, go back (they
    // may have come after the owners dropped those of its process).
    if (static_cast<OutcomeKind>(outcome.kind) == OutcomeKind::kStoredValue) {
      FreeResultOfGoneOwner(outcome);
    }
    GiveBackLentTo(outcome);
    return;
  }
  // An owner that ended without this node hearing of it yet drops the post;
  // this node frees the stored value with the rest of the owner's objects
  // once it hears (kOwnerGone), and the owners of the references inside drop
  // its registrations then (kBorrowerGone). The driver's owner shares node
  // 0's rank: its post loops back in-process.
  transport_.Post(outcome.owner_rank, kOwnerOutcome, Encode(outcome));
}

std::chrono::milliseconds NodeManager::OnIdle() {
  const auto now = std::chrono::steady_clock::now();
  auto deadline = scheduler_.NextDeadline();
  if (deadline && *deadline <= now) {
    Apply(scheduler_.EndOverdue(now));
    deadline = scheduler_.NextDeadline();
  }
  auto again = BroadcastIfDirty();
  if (deadline && *deadline != std::chrono::steady_clock::time_point::max()) {
    const auto until = std::chrono::ceil<std::chrono::milliseconds>(*deadline - now) +
                       std::chrono::milliseconds(1);
    if (again.count() == 0 || until < again) again = until;
  }
  return again;
}

std::chrono::milliseconds NodeManager::BroadcastIfDirty() {
  if (stopping_.load() || !scheduler_.NeedsBroadcast()) return std::chrono::milliseconds(0);
  const auto now = std::chrono::steady_clock::now();
  constexpr auto kPeriod = std::chrono::milliseconds(2);
  if (now - last_broadcast_ < kPeriod) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(kPeriod -
                                                                 (now - last_broadcast_)) +
           std::chrono::milliseconds(1);
  }
  last_broadcast_ = now;
  const auto message = Encode(scheduler_.MarkBroadcast());
  for (const auto& node : scheduler_.nodes()) {
    if (node.node_id != config_.node_id) transport_.Post(node.rank, kResourceUpdate, message);
  }
  return std::chrono::milliseconds(0);
}

}  // namespace sray::core
