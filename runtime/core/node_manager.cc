#include "core/node_manager.h"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <shared_mutex>

#include "common/host_name.h"
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
  Result<std::string> Create(const ObjectId& id, std::uint64_t size) override {
    auto path = manager_.store_->Create(id, size, true);
    if (!path.ok()) return path.status();
    return path->string();
  }
  void Seal(const ObjectId& id, std::uint64_t /*size*/) override { manager_.store_->Seal(id); }
  Result<std::string> MakeLocal(const ObjectId& id, std::uint32_t holder,
                                std::uint64_t size) override {
    return manager_.MakeLocal(id, holder, size);
  }
  void Free(const ObjectId& id, std::uint32_t holder) override {
    if (holder == manager_.config_.node_id) {
      manager_.FreeLocal(id);
      return;
    }
    manager_.transport_.Post(manager_.RankOfNode(holder), kFreeObject,
                             Encode(FreeObject{.id = id, .node = holder}));
  }

 private:
  NodeManager& manager_;
};

Result<std::unique_ptr<NodeManager>> NodeManager::Create(
    NodeManagerConfig config, transport::Transport& transport,
    std::shared_ptr<transport::AddressBook> address_book) {
  auto store = object::ObjectStore::Open(config.store);
  if (!store.ok()) return store.status();
  std::unique_ptr<NodeManager> manager(new NodeManager(
      std::move(config), transport, std::move(address_book), std::move(store).value()));
  NodeManager* raw = manager.get();
  auto processes = sched::WorkerProcesses::Create([raw](pid_t pid, int wait_status) {
    if (raw->stopping_.load()) return;
    raw->loop_->Post([raw, pid, wait_status] { raw->OnWorkerExited(pid, wait_status); });
  });
  if (!processes.ok()) return processes.status();
  manager->processes_ = std::move(processes).value();
  manager->RegisterHandlers();
  return manager;
}

NodeManager::NodeManager(NodeManagerConfig config, transport::Transport& transport,
                         std::shared_ptr<transport::AddressBook> address_book,
                         std::unique_ptr<object::ObjectStore> store)
    : config_(std::move(config)),
      transport_(transport),
      address_book_(std::move(address_book)),
      store_(std::move(store)),
      available_(config_.total),
      gpus_(config_.gpu_devices) {
  store_access_ = std::make_unique<LocalStoreAccess>(*this);
  blocking_ = std::make_unique<SerialExecutor>();
  loop_ = std::make_unique<SerialExecutor>([this] { return BroadcastIfDirty(); });
}

NodeManager::~NodeManager() {
  Stop();
  processes_.reset();
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
  std::lock_guard lock(pulls_mutex_);
  pull_sources_.clear();
}

void NodeManager::SetLocalOwner(Owner* owner) {
  local_owner_.store(owner);
}

void NodeManager::SetLocalDirectory(ActorDirectory* directory) {
  local_directory_.store(directory);
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
    nodes_ = std::move(view.nodes);
    node_available_.clear();
    for (const auto& node : nodes_) node_available_.push_back(node.total);
    node_queued_.assign(nodes_.size(), 0);
    Dispatch();
  });
}

std::uint32_t NodeManager::RankOfNode(std::uint32_t node) const {
  std::lock_guard lock(view_mutex_);
  return node < node_ranks_.size() ? node_ranks_[node] : 0;
}

void NodeManager::Submit(TaskSpec spec) {
  loop_->RunHereOrPost([this, spec = std::move(spec)]() mutable { Schedule(std::move(spec)); });
}

void NodeManager::StopActor(ActorKill kill) {
  loop_->Post([this, kill] { StopActorWorker(kill); });
}

void NodeManager::ForwardActorChange(const ActorChanged& changed) {
  transport_.Post(changed.caller_rank, kActorChanged, Encode(changed));
}

void NodeManager::RegisterHandlers() {
  guard_ = std::make_shared<HandlerGuard>();
  guard_->manager = this;
  auto guard = guard_;
  // Runs `work` with the manager if it still exists.
  auto with = [guard](auto&& work) {
    std::shared_lock lock(guard->mutex);
    if (guard->manager != nullptr) work(*guard->manager);
  };

  transport_.RegisterOneWayHandler(kSubmitTask, [with](std::uint32_t, auto payload) {
    auto spec = Decode<TaskSpec>(payload, "task");
    if (!spec.ok()) return;
    with([&](NodeManager& manager) { manager.Submit(std::move(spec).value()); });
  });
  transport_.RegisterOneWayHandler(kTaskDone, [with](std::uint32_t source, auto payload) {
    auto outcome = Decode<TaskOutcome>(payload, "task outcome");
    if (!outcome.ok()) return;
    with([&](NodeManager& manager) {
      manager.loop_->RunHereOrPost(
          [&manager, source, outcome = std::move(outcome).value()]() mutable {
            manager.OnTaskDone(source, std::move(outcome));
          });
    });
  });
  for (const std::uint32_t method : {kWorkerBlocked, kWorkerUnblocked}) {
    transport_.RegisterOneWayHandler(method, [with, method](std::uint32_t source, auto) {
      with([&](NodeManager& manager) {
        manager.loop_->Post([&manager, source, method] {
          manager.OnWorkerBlocked(source, method == kWorkerBlocked);
        });
      });
    });
  }
  transport_.RegisterOneWayHandler(kTaskOutcome, [with](std::uint32_t, auto payload) {
    auto outcome = Decode<TaskOutcome>(payload, "task outcome");
    if (!outcome.ok()) return;
    with([&](NodeManager& manager) {
      manager.loop_->RunHereOrPost([&manager, outcome = std::move(outcome).value()]() mutable {
        manager.Route(std::move(outcome));
      });
    });
  });
  transport_.RegisterOneWayHandler(kStopActorWorker, [with](std::uint32_t, auto payload) {
    auto kill = Decode<ActorKill>(payload, "actor stop");
    if (!kill.ok()) return;
    with([&](NodeManager& manager) { manager.StopActor(*kill); });
  });
  transport_.RegisterOneWayHandler(kActorChanged, [with](std::uint32_t, auto payload) {
    auto changed = Decode<ActorChanged>(payload, "actor change");
    if (!changed.ok()) return;
    with([&](NodeManager& manager) { manager.ForwardActorChange(*changed); });
  });
  transport_.RegisterOneWayHandler(kResourceUpdate, [with](std::uint32_t, auto payload) {
    auto update = Decode<ResourceUpdate>(payload, "resource update");
    if (!update.ok()) return;
    with([&](NodeManager& manager) {
      manager.loop_->RunHereOrPost([&manager, update = std::move(update).value()]() mutable {
        if (update.node_id < manager.node_available_.size()) {
          manager.node_available_[update.node_id] = std::move(update.available);
          manager.node_queued_[update.node_id] = update.queued;
          manager.Dispatch();
        }
      });
    });
  });
  transport_.RegisterRequestHandler(
      kRegisterWorker, [with](std::uint32_t, auto payload) -> Result<transport::Bytes> {
        auto registration = Decode<WorkerRegistration>(payload, "worker registration");
        if (!registration.ok()) return registration.status();
        Status status = Status::Unavailable("the node manager is stopping");
        with([&](NodeManager& manager) {
          const auto& address = registration->address;
          manager.address_book_->Add(
              registration->rank,
              {.address = transport::Bytes(
                   reinterpret_cast<const std::byte*>(address.data()),
                   reinterpret_cast<const std::byte*>(address.data()) + address.size()),
               .pid = static_cast<pid_t>(registration->pid),
               .description = "worker " + std::to_string(registration->rank - kFirstWorkerRank) +
                              " (pid " + std::to_string(registration->pid) + ") of node " +
                              std::to_string(manager.config_.node_id)});
          const std::uint32_t rank = registration->rank;
          manager.loop_->Post([&manager, rank] { manager.OnWorkerRegistered(rank); });
          status = Status::Ok();
        });
        if (!status.ok()) return status;
        return Empty();
      });
  // Object requests that block (spills, restores, pulls) are answered from
  // the blocking executor, never from the progress thread.
  auto serve_blocking = [this, with](std::uint32_t method, auto answer) {
    transport_.RegisterDeferredRequestHandler(
        method, [with, answer](std::uint32_t, auto payload, transport::Responder responder) {
          auto request = Decode<ObjectRequest>(payload, "object request");
          if (!request.ok()) return responder.Reply(request.status());
          with([&](NodeManager& manager) {
            manager.blocking_->Post([&manager, request = *request, responder, answer] {
              responder.Reply(answer(manager, request));
            });
          });
        });
  };
  serve_blocking(
      kCreateObject,
      [](NodeManager& manager, const ObjectRequest& request) -> Result<transport::Bytes> {
        auto path = manager.store_->Create(request.id, request.size, true);
        if (!path.ok()) return path.status();
        return Encode(ObjectPath{.path = path->string(), .size = request.size});
      });
  serve_blocking(
      kMakeLocal,
      [](NodeManager& manager, const ObjectRequest& request) -> Result<transport::Bytes> {
        auto path = manager.MakeLocal(request.id, request.node, request.size);
        if (!path.ok()) return path.status();
        return Encode(ObjectPath{.path = *path, .size = request.size});
      });
  serve_blocking(
      kPinForPull,
      [](NodeManager& manager, const ObjectRequest& request) -> Result<transport::Bytes> {
        auto source = manager.PinForPull(request.id, request.node);
        if (!source.ok()) return source.status();
        return Encode(*source);
      });
  transport_.RegisterOneWayHandler(kSealObject, [with](std::uint32_t, auto payload) {
    auto request = Decode<ObjectRequest>(payload, "object request");
    if (!request.ok()) return;
    with([&](NodeManager& manager) { manager.store_->Seal(request->id); });
  });
  transport_.RegisterOneWayHandler(kFreeObject, [with](std::uint32_t, auto payload) {
    auto request = Decode<FreeObject>(payload, "free");
    if (!request.ok()) return;
    with([&](NodeManager& manager) {
      if (request->node == manager.config_.node_id) {
        manager.FreeLocal(request->id);
        return;
      }
      manager.transport_.Post(manager.RankOfNode(request->node), kFreeObject, Encode(*request));
    });
  });
  transport_.RegisterOneWayHandler(kUnpinForPull, [with](std::uint32_t, auto payload) {
    auto request = Decode<ObjectRequest>(payload, "unpin");
    if (!request.ok()) return;
    with([&](NodeManager& manager) { manager.UnpinForPull(request->id); });
  });
  transport_.RegisterRequestHandler(kStoreUsage,
                                    [with](std::uint32_t, auto) -> Result<transport::Bytes> {
                                      core::StoreUsage usage;
                                      with([&](NodeManager& manager) {
                                        const auto snapshot = manager.store_->Usage();
                                        usage = {.capacity = snapshot.capacity,
                                                 .in_memory = snapshot.in_memory,
                                                 .spilled = snapshot.spilled,
                                                 .objects = snapshot.objects};
                                      });
                                      return Encode(usage);
                                    });
}

// ---- scheduling (event loop) ----

std::string NodeManager::InfeasibleMessage(const TaskSpec& spec) const {
  std::string largest;
  double most_cpus = -1;
  std::uint32_t largest_node = 0;
  for (const auto& node : nodes_) {
    const auto cpus = node.total.contains("CPU") ? node.total.at("CPU") : 0.0;
    if (cpus > most_cpus) {
      most_cpus = cpus;
      largest = sched::Describe(node.total);
      largest_node = node.node_id;
    }
  }
  return "asks " + sched::Describe(spec.resources) +
         " but no node of this job can ever provide that (the largest, node " +
         std::to_string(largest_node) + ", has " + largest +
         "): lower the request, or give the nodes more (srun --cpus-per-task, sray run "
         "--cpus-per-node, or --ray-cluster=resources=NAME:AMOUNT for custom resources and GPUs)";
}

TaskOutcome NodeManager::OutcomeFor(const TaskSpec& spec, OutcomeKind kind,
                                    std::string message) const {
  TaskOutcome outcome = FailedOutcome(spec, kind, std::move(message));
  outcome.node = config_.node_id;
  return outcome;
}

void NodeManager::Schedule(TaskSpec spec) {
  if (stopping_.load()) return;
  if (!sched::Fits(spec.resources, config_.total)) {
    const bool anywhere = std::any_of(nodes_.begin(), nodes_.end(), [&](const auto& node) {
      return sched::Fits(spec.resources, node.total);
    });
    if (!anywhere) {
      Route(OutcomeFor(spec, OutcomeKind::kInfeasible, InfeasibleMessage(spec)));
      return;
    }
    if (!Forward(spec, ForwardTo::kFreeOrShortQueue)) Forward(spec, ForwardTo::kAnyFeasible);
    return;
  }
  queues_[spec.resources].push_back(std::move(spec));
  ++queued_;
  Dispatch();
}

bool NodeManager::Forward(TaskSpec& spec, ForwardTo where) {
  // Prefer a node with the resources free now, then the shortest queue.
  std::optional<std::uint32_t> best;
  bool best_free = false;
  std::uint32_t best_queued = 0;
  for (std::uint32_t node = 0; node < nodes_.size(); ++node) {
    if (node == config_.node_id || !sched::Fits(spec.resources, nodes_[node].total)) continue;
    const bool free = sched::Fits(spec.resources, node_available_[node]);
    const double cpus = nodes_[node].total.contains("CPU") ? nodes_[node].total.at("CPU") : 1.0;
    const auto queue_limit = static_cast<std::uint32_t>(kQueuedPerRemoteCpu * std::max(1.0, cpus));
    const bool acceptable =
        where == ForwardTo::kAnyFeasible || free ||
        (where == ForwardTo::kFreeOrShortQueue && node_queued_[node] < queue_limit);
    if (!acceptable) continue;
    if (!best || (free && !best_free) || (free == best_free && node_queued_[node] < best_queued)) {
      best = node;
      best_free = free;
      best_queued = node_queued_[node];
    }
  }
  if (!best) return false;
  // Assume it is taken until the node's next update says otherwise.
  if (best_free) {
    sched::Subtract(node_available_[*best], spec.resources);
  } else {
    node_queued_[*best]++;
  }
  spec.hops++;
  // A node that died takes the job with it (the launcher ends the step).
  transport_.Post(nodes_[*best].rank, kSubmitTask, Encode(spec));
  return true;
}

namespace {

// How many tasks of `shape` fit into `available` at once.
std::size_t TimesItFits(const sched::ResourceMap& shape, const sched::ResourceMap& available,
                        std::size_t at_most) {
  std::size_t times = at_most;
  for (const auto& [name, amount] : shape) {
    if (amount <= 0) continue;
    const auto found = available.find(name);
    const double have = found == available.end() ? 0.0 : found->second;
    times = std::min(times, static_cast<std::size_t>(std::max(0.0, (have + 1e-9) / amount)));
  }
  return times;
}

}  // namespace

void NodeManager::Dispatch() {
  if (stopping_.load() || nodes_.empty()) return;
  std::size_t waiting_for_worker = 0;
  std::size_t waiting_actors = 0;
  for (auto shape = queues_.begin(); shape != queues_.end();) {
    auto& tasks = shape->second;
    // 1. Idle workers here, with fresh grants of resources.
    while (!tasks.empty() && !idle_.empty() && sched::Fits(shape->first, available_)) {
      const double gpus = shape->first.contains("GPU") ? shape->first.at("GPU") : 0.0;
      auto devices = gpus_.Acquire(gpus);
      if (!devices) break;
      const std::uint32_t worker = idle_.back();
      idle_.pop_back();
      sched::Subtract(available_, shape->first);
      dirty_ = true;
      WorkerState& state = workers_[worker];
      state.devices = *devices;
      state.granted = shape->first;
      TaskSpec task = std::move(tasks.front());
      tasks.pop_front();
      --queued_;
      task.visible_devices = gpus > 0 ? sched::DeviceList(*devices) : std::string();
      SendToWorker(worker, state, std::move(task));
    }
    if (!tasks.empty() && sched::Fits(shape->first, available_)) {
      const std::size_t fitting = TimesItFits(shape->first, available_, tasks.size());
      waiting_for_worker += fitting;
      for (std::size_t index = 0; index < fitting; ++index) {
        if (tasks[index].kind == static_cast<std::uint8_t>(TaskKind::kActorCreation))
          ++waiting_actors;
      }
    }
    // 2. Other nodes with room or a short queue. Only tasks submitted here
    // move for load, so a task is not passed around.
    while (!tasks.empty() && tasks.front().hops == 0 && !sched::Fits(shape->first, available_) &&
           Forward(tasks.front(), ForwardTo::kFreeOrShortQueue)) {
      tasks.pop_front();
      --queued_;
    }
    // 3. Behind a task of the same shape on a busy worker here, only when
    // the node has no room of its own for them: with room, a worker is
    // starting for them, and a short task must not wait behind a long one.
    for (auto& [rank, state] : workers_) {
      if (tasks.empty() || sched::Fits(shape->first, available_)) break;
      if (state.assigned.empty() || state.granted != shape->first || state.lent_cpus > 0) continue;
      // A constructor needs a worker of its own, and so does the actor.
      if (state.assigned.front().kind != static_cast<std::uint8_t>(TaskKind::kFunction)) continue;
      while (!tasks.empty() && state.assigned.size() <= kTasksPipelinedPerWorker &&
             tasks.front().kind == static_cast<std::uint8_t>(TaskKind::kFunction)) {
        TaskSpec task = std::move(tasks.front());
        tasks.pop_front();
        --queued_;
        task.visible_devices = state.assigned.front().visible_devices;
        SendToWorker(rank, state, std::move(task));
      }
    }
    shape = tasks.empty() ? queues_.erase(shape) : std::next(shape);
  }
  // Actors' workers do not count against the pool's cap: each actor needs
  // a process of its own.
  const auto task_workers = workers_.size() - actor_workers_;
  while (waiting_for_worker > starting_ &&
         task_workers + starting_ < config_.max_workers + waiting_actors &&
         deaths_before_start_ < 3) {
    StartWorker();
  }
}

void NodeManager::SendToWorker(std::uint32_t worker, WorkerState& state, TaskSpec task) {
  // If the worker is dying, its exit (seen through its pidfd) hands the
  // assigned tasks back.
  transport_.Post(worker, kExecuteTask, Encode(task));
  state.assigned.push_back(std::move(task));
}

void NodeManager::StartWorker() {
  const std::uint32_t rank = kFirstWorkerRank + config_.node_id * kWorkersPerNodeLimit +
                             (next_worker_++ % kWorkersPerNodeLimit);
  auto address = transport_.LocalAddress(false);
  if (!address.ok()) {
    FailQueued(OutcomeKind::kSystemError, "cannot start a worker: " + address.status().message());
    return;
  }
  std::vector<std::string> inherited;
  for (char** variable = environ; *variable != nullptr; ++variable)
    inherited.emplace_back(*variable);
  const WorkerLaunch launch{
      .rank = rank,
      .manager_rank = config_.rank,
      .manager_address = *address,
      .head_rank = config_.head_rank,
      .head_address = config_.head_address.empty() ? *address : config_.head_address,
      .secret = config_.secret,
      .parent = ::getpid()};
  const std::vector<std::string> environment = WorkerEnvironment(launch, inherited);
  auto pid = processes_->Spawn(config_.executable, config_.arguments, environment);
  if (!pid.ok()) {
    FailQueued(OutcomeKind::kSystemError, "cannot start a worker on node " +
                                              std::to_string(config_.node_id) + ": " +
                                              pid.status().message());
    return;
  }
  workers_[rank] =
      WorkerState{.pid = *pid, .registered = false, .assigned = {}, .granted = {}, .devices = {}};
  worker_by_pid_[*pid] = rank;
  ++starting_;
}

void NodeManager::OnWorkerRegistered(std::uint32_t rank) {
  auto found = workers_.find(rank);
  if (found == workers_.end() || found->second.registered) return;
  found->second.registered = true;
  ever_registered_ = true;
  deaths_before_start_ = 0;
  if (starting_ > 0) --starting_;
  idle_.push_back(rank);
  Dispatch();
}

void NodeManager::OnTaskDone(std::uint32_t worker_rank, TaskOutcome outcome) {
  auto found = workers_.find(worker_rank);
  if (found == workers_.end() || found->second.assigned.empty()) return;
  WorkerState& state = found->second;
  // Usually the front one; a worker waiting in Get runs later ones first.
  auto done = std::find_if(state.assigned.begin(), state.assigned.end(), [&](const TaskSpec& task) {
    return task.task_id == outcome.task_id && task.return_id == outcome.return_id;
  });
  if (done == state.assigned.end()) return;
  const bool constructor = done->kind == static_cast<std::uint8_t>(TaskKind::kActorCreation);
  state.assigned.erase(done);
  if (constructor) {
    OnActorCreated(worker_rank, state, std::move(outcome));
    Dispatch();
    return;
  }
  if (state.assigned.empty()) {
    ReleaseGrant(state);
    idle_.push_back(worker_rank);
  }
  Route(std::move(outcome));
  Dispatch();
}

void NodeManager::OnWorkerBlocked(std::uint32_t worker_rank, bool blocked) {
  auto found = workers_.find(worker_rank);
  if (found == workers_.end()) return;
  WorkerState& state = found->second;
  if (blocked) {
    // Ray's rule: a task waiting for others lends its CPUs (not its GPUs).
    const auto cpus = state.granted.find("CPU");
    if (state.assigned.empty() || cpus == state.granted.end() || state.lent_cpus > 0) return;
    state.lent_cpus = cpus->second;
    available_["CPU"] += state.lent_cpus;
  } else {
    if (state.lent_cpus <= 0) return;
    // Taken back at once, even if others use them now: the node runs over
    // its CPUs until they finish.
    available_["CPU"] -= state.lent_cpus;
    state.lent_cpus = 0;
  }
  dirty_ = true;
  Dispatch();
}

void NodeManager::ReleaseGrant(WorkerState& state) {
  sched::Add(available_, state.granted);
  available_["CPU"] -= state.lent_cpus;  // already given back while it waited
  state.lent_cpus = 0;
  const double gpus = state.granted.contains("GPU") ? state.granted.at("GPU") : 0.0;
  gpus_.Release(state.devices, gpus);
  state.devices.clear();
  state.granted.clear();
  dirty_ = true;
}

void NodeManager::OnWorkerExited(pid_t pid, int wait_status) {
  auto by_pid = worker_by_pid_.find(pid);
  if (by_pid == worker_by_pid_.end()) return;
  const std::uint32_t rank = by_pid->second;
  worker_by_pid_.erase(by_pid);
  address_book_->Remove(rank);
  auto found = workers_.find(rank);
  if (found == workers_.end()) return;
  WorkerState state = std::move(found->second);
  workers_.erase(found);
  idle_.erase(std::remove(idle_.begin(), idle_.end(), rank), idle_.end());
  const std::string how = sched::DescribeWaitStatus(wait_status);
  if (state.actor_id != 0) {
    --actor_workers_;
    ReleaseGrant(state);
    ReportActorDeath(ActorDeath{.id = state.actor_id,
                                .incarnation = state.incarnation,
                                .node = config_.node_id,
                                .pid = pid,
                                .cause = "ended with " + how});
    Dispatch();
    return;
  }
  if (!state.registered) {
    if (starting_ > 0) --starting_;
    ++deaths_before_start_;
    if (deaths_before_start_ >= 3 && !ever_registered_) {
      FailQueued(OutcomeKind::kSystemError,
                 "workers of node " + std::to_string(config_.node_id) +
                     " end before they start (last: " + how +
                     "): the program must call "
                     "sray::Init(argc, argv) at the top of main, before anything that can fail "
                     "or exit; see the job's output for the workers' own messages");
      return;
    }
  }
  if (!state.assigned.empty()) {
    ReleaseGrant(state);
    const TaskSpec& spec = state.assigned.front();
    TaskOutcome outcome =
        OutcomeFor(spec, OutcomeKind::kWorkerDied,
                   "its worker (pid " + std::to_string(pid) + ") on node " +
                       std::to_string(config_.node_id) + " died with " + how + " while running it");
    outcome.pid = pid;
    Route(std::move(outcome));
    // Tasks waiting behind it never started: they go back to the queue.
    for (std::size_t index = state.assigned.size(); index-- > 1;) {
      auto& waiting = state.assigned[index];
      waiting.visible_devices.clear();
      queues_[waiting.resources].push_front(std::move(waiting));
      ++queued_;
    }
  }
  Dispatch();
}

void NodeManager::OnActorCreated(std::uint32_t worker_rank, WorkerState& state,
                                 TaskOutcome outcome) {
  const auto kind = static_cast<OutcomeKind>(outcome.kind);
  const bool created = kind == OutcomeKind::kInlineValue || kind == OutcomeKind::kStoredValue;
  if (created) {
    // The worker is the actor's now, with the grant, until its process ends.
    state.actor_id = outcome.actor_id;
    state.incarnation = outcome.incarnation;
    ++actor_workers_;
    outcome.worker_rank = worker_rank;
    if (auto entry = address_book_->Find(worker_rank)) {
      outcome.worker_address.assign(reinterpret_cast<const char*>(entry->address.data()),
                                    entry->address.size());
    }
    outcome.hostname = HostName();
  } else {
    ReleaseGrant(state);
    idle_.push_back(worker_rank);
  }
  ReportActorCreated(std::move(outcome));
}

void NodeManager::StopActorWorker(const ActorKill& kill) {
  for (auto& [rank, state] : workers_) {
    const bool serves = state.actor_id == kill.id && state.incarnation == kill.incarnation;
    const bool constructing = !state.assigned.empty() &&
                              state.assigned.front().actor_id == kill.id &&
                              state.assigned.front().incarnation == kill.incarnation;
    // Its exit (pidfd) frees the grant and reports the death.
    if (serves || constructing) processes_->Kill(state.pid, SIGKILL);
  }
  for (auto& [shape, tasks] : queues_) {
    const auto before = tasks.size();
    std::erase_if(tasks, [&](const TaskSpec& task) {
      return task.actor_id == kill.id && task.incarnation == kill.incarnation &&
             task.kind == static_cast<std::uint8_t>(TaskKind::kActorCreation);
    });
    queued_ -= before - tasks.size();
  }
  Dispatch();
}

void NodeManager::ReportActorCreated(TaskOutcome outcome) {
  if (ActorDirectory* directory = local_directory_.load()) {
    directory->OnCreated(std::move(outcome));
    return;
  }
  transport_.Post(config_.head_rank, kActorCreated, Encode(outcome));
}

void NodeManager::ReportActorDeath(const ActorDeath& death) {
  if (ActorDirectory* directory = local_directory_.load()) {
    directory->OnWorkerDied(death);
    return;
  }
  transport_.Post(config_.head_rank, kActorWorkerDied, Encode(death));
}

void NodeManager::FailQueued(OutcomeKind kind, const std::string& message) {
  std::map<sched::ResourceMap, std::deque<TaskSpec>> failed;
  failed.swap(queues_);
  queued_ = 0;
  for (const auto& [shape, tasks] : failed) {
    for (const auto& spec : tasks) Route(OutcomeFor(spec, kind, message));
  }
}

void NodeManager::Route(TaskOutcome outcome) {
  // Actor calls never pass through here: an actor's outcome is its constructor's.
  if (outcome.actor_id != 0) {
    ReportActorCreated(std::move(outcome));
    return;
  }
  Owner* owner = local_owner_.load();
  if (owner != nullptr && outcome.owner_rank == config_.rank) {
    owner->OnTaskOutcome(std::move(outcome));
    return;
  }
  const std::uint32_t destination =
      outcome.owner_node == config_.node_id ? outcome.owner_rank : RankOfNode(outcome.owner_node);
  // If the owner is gone, so is everyone who could use the result; a stored
  // value then stays until the step ends and the store is removed.
  transport_.Post(destination, kTaskOutcome, Encode(outcome));
}

std::chrono::milliseconds NodeManager::BroadcastIfDirty() {
  if (queued_ != last_broadcast_queued_) dirty_ = true;
  if (!dirty_ || nodes_.empty() || stopping_.load()) return std::chrono::milliseconds(0);
  const auto now = std::chrono::steady_clock::now();
  constexpr auto kPeriod = std::chrono::milliseconds(2);
  if (now - last_broadcast_ < kPeriod) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(kPeriod -
                                                                 (now - last_broadcast_)) +
           std::chrono::milliseconds(1);
  }
  dirty_ = false;
  last_broadcast_ = now;
  last_broadcast_queued_ = queued_;
  const auto message = Encode(ResourceUpdate{.node_id = config_.node_id,
                                             .available = available_,
                                             .queued = static_cast<std::uint32_t>(queued_)});
  for (const auto& node : nodes_) {
    if (node.node_id != config_.node_id) transport_.Post(node.rank, kResourceUpdate, message);
  }
  return std::chrono::milliseconds(0);
}

// ---- objects (any thread) ----

Result<std::string> NodeManager::MakeLocal(const ObjectId& id, std::uint32_t holder,
                                           std::uint64_t size) {
  if (holder == config_.node_id) {
    auto path = store_->Locate(id);
    if (!path.ok()) return path.status();
    return path->string();
  }
  std::lock_guard fetch(fetch_mutex_);
  // A copy pulled earlier, unless it has been lost meanwhile.
  if (store_->Contains(id)) {
    auto path = store_->Locate(id);
    if (path.ok()) return path->string();
  }
  const std::uint32_t holder_rank = RankOfNode(holder);
  const auto request =
      Encode(ObjectRequest{.id = id, .size = size, .node = config_.node_id, .owner_rank = 0});
  auto reply = transport_.Call(holder_rank, kPinForPull, request);
  if (!reply.ok()) {
    return reply.status().WithContext("cannot reach object " + id.ToString() + " on node " +
                                      std::to_string(holder));
  }
  auto source = Decode<PullSource>(*reply, "pull source");
  if (!source.ok()) return source.status();
  auto unpin = [&] { transport_.Post(holder_rank, kUnpinForPull, request); };
  auto path = store_->Create(id, source->size, false);
  if (!path.ok()) {
    unpin();
    return path.status();
  }
  auto file = object::MappedFile::Create(*path, source->size);
  if (!file.ok()) {
    store_->Abort(id);
    unpin();
    return file.status();
  }
  const auto key = std::span<const std::byte>(
      reinterpret_cast<const std::byte*>(source->key.data()), source->key.size());
  const Status pulled = source->size == 0
                            ? Status::Ok()
                            : transport_.Pull(holder_rank, source->address, key, (*file)->data(),
                                              source->size, std::chrono::minutes(10));
  unpin();
  file->reset();
  if (!pulled.ok()) {
    store_->Abort(id);
    return pulled.WithContext("cannot pull object " + id.ToString() + " from node " +
                              std::to_string(holder));
  }
  store_->Seal(id);
  return path->string();
}

Result<PullSource> NodeManager::PinForPull(const ObjectId& id, std::uint32_t puller_node) {
  auto path = store_->Locate(id);
  if (!path.ok()) return path.status();
  std::lock_guard lock(pulls_mutex_);
  PullRegistration& registration = pull_sources_[id];
  if (!registration.file) {
    auto file = object::MappedFile::OpenReadOnly(*path);
    if (!file.ok()) {
      pull_sources_.erase(id);
      return file.status();
    }
    if ((*file)->size() > 0) {
      auto memory = transport_.Register((*file)->data(), (*file)->size());
      if (!memory.ok()) {
        pull_sources_.erase(id);
        return memory.status();
      }
      registration.memory = std::move(memory).value();
    }
    registration.file = std::move(file).value();
    store_->Pin(id);
  }
  registration.pulls++;
  copies_[id].insert(puller_node);
  PullSource source;
  source.address = reinterpret_cast<std::uint64_t>(registration.file->data());
  source.size = registration.file->size();
  if (registration.memory) {
    const auto key = registration.memory->packed_key();
    source.key.assign(reinterpret_cast<const char*>(key.data()), key.size());
  }
  return source;
}

void NodeManager::UnpinForPull(const ObjectId& id) {
  std::lock_guard lock(pulls_mutex_);
  auto found = pull_sources_.find(id);
  if (found == pull_sources_.end()) return;
  if (--found->second.pulls > 0) return;
  pull_sources_.erase(found);
  store_->Unpin(id);
}

void NodeManager::FreeLocal(const ObjectId& id) {
  store_->Free(id);
  std::set<std::uint32_t> holders;
  {
    std::lock_guard lock(pulls_mutex_);
    auto found = copies_.find(id);
    if (found == copies_.end()) return;
    holders = std::move(found->second);
    copies_.erase(found);
  }
  for (const auto node : holders) {
    transport_.Post(RankOfNode(node), kFreeObject, Encode(FreeObject{.id = id, .node = node}));
  }
}

}  // namespace sray::core
