#include "core/node_manager.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <shared_mutex>

extern char** environ;

namespace sray::core {
namespace {

std::string Hex(std::span<const std::byte> bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  text.reserve(bytes.size() * 2);
  for (const auto byte : bytes) {
    const auto value = static_cast<unsigned>(byte);
    text += kDigits[value >> 4];
    text += kDigits[value & 15];
  }
  return text;
}

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
    NodeManager* manager = &manager_;
    manager_.loop_->Post([manager, id, holder] {
      const auto message = Encode(FreeObject{.id = id, .node = holder});
      (void)manager->transport_.Send(manager->RankOfNode(holder), kFreeObject, message);
    });
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
    Dispatch();
  });
}

std::uint32_t NodeManager::RankOfNode(std::uint32_t node) const {
  std::lock_guard lock(view_mutex_);
  return node < node_ranks_.size() ? node_ranks_[node] : 0;
}

void NodeManager::Submit(TaskSpec spec) {
  loop_->Post([this, spec = std::move(spec)]() mutable { Schedule(std::move(spec)); });
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
      manager.loop_->Post([&manager, source, outcome = std::move(outcome).value()]() mutable {
        manager.OnTaskDone(source, std::move(outcome));
      });
    });
  });
  transport_.RegisterOneWayHandler(kTaskOutcome, [with](std::uint32_t, auto payload) {
    auto outcome = Decode<TaskOutcome>(payload, "task outcome");
    if (!outcome.ok()) return;
    with([&](NodeManager& manager) {
      manager.loop_->Post([&manager, outcome = std::move(outcome).value()]() mutable {
        manager.Route(std::move(outcome));
      });
    });
  });
  transport_.RegisterOneWayHandler(kResourceUpdate, [with](std::uint32_t, auto payload) {
    auto update = Decode<ResourceUpdate>(payload, "resource update");
    if (!update.ok()) return;
    with([&](NodeManager& manager) {
      manager.loop_->Post([&manager, update = std::move(update).value()]() mutable {
        if (update.node_id < manager.node_available_.size()) {
          manager.node_available_[update.node_id] = std::move(update.available);
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
              {.address = transport::Bytes(reinterpret_cast<const std::byte*>(address.data()),
                                           reinterpret_cast<const std::byte*>(address.data()) +
                                               address.size()),
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
  transport_.RegisterDeferredRequestHandler(
      kCreateObject, [with](std::uint32_t, auto payload, transport::Responder responder) {
        auto request = Decode<ObjectRequest>(payload, "object request");
        if (!request.ok()) return responder.Reply(request.status());
        with([&](NodeManager& manager) {
          manager.blocking_->Post([&manager, request = *request, responder] {
            auto path = manager.store_->Create(request.id, request.size, true);
            if (!path.ok()) return responder.Reply(path.status());
            responder.Reply(Encode(ObjectPath{.path = path->string(), .size = request.size}));
          });
        });
      });
  transport_.RegisterOneWayHandler(kSealObject, [with](std::uint32_t, auto payload) {
    auto request = Decode<ObjectRequest>(payload, "object request");
    if (!request.ok()) return;
    with([&](NodeManager& manager) { manager.store_->Seal(request->id); });
  });
  transport_.RegisterDeferredRequestHandler(
      kMakeLocal, [with](std::uint32_t, auto payload, transport::Responder responder) {
        auto request = Decode<ObjectRequest>(payload, "object request");
        if (!request.ok()) return responder.Reply(request.status());
        with([&](NodeManager& manager) {
          manager.blocking_->Post([&manager, request = *request, responder] {
            auto path = manager.MakeLocal(request.id, request.node, request.size);
            if (!path.ok()) return responder.Reply(path.status());
            responder.Reply(Encode(ObjectPath{.path = *path, .size = request.size}));
          });
        });
      });
  transport_.RegisterOneWayHandler(kFreeObject, [with](std::uint32_t, auto payload) {
    auto request = Decode<FreeObject>(payload, "free");
    if (!request.ok()) return;
    with([&](NodeManager& manager) {
      if (request->node == manager.config_.node_id) {
        manager.FreeLocal(request->id);
        return;
      }
      manager.loop_->Post([&manager, request = *request] {
        (void)manager.transport_.Send(manager.RankOfNode(request.node), kFreeObject,
                                      Encode(request));
      });
    });
  });
  transport_.RegisterDeferredRequestHandler(
      kPinForPull, [with](std::uint32_t, auto payload, transport::Responder responder) {
        auto request = Decode<ObjectRequest>(payload, "pin");
        if (!request.ok()) return responder.Reply(request.status());
        with([&](NodeManager& manager) {
          manager.blocking_->Post([&manager, request = *request, responder] {
            auto source = manager.PinForPull(request.id, request.node);
            if (!source.ok()) return responder.Reply(source.status());
            responder.Reply(Encode(*source));
          });
        });
      });
  transport_.RegisterOneWayHandler(kUnpinForPull, [with](std::uint32_t, auto payload) {
    auto request = Decode<ObjectRequest>(payload, "unpin");
    if (!request.ok()) return;
    with([&](NodeManager& manager) { manager.UnpinForPull(request->id); });
  });
  transport_.RegisterRequestHandler(
      kStoreUsage, [with](std::uint32_t, auto) -> Result<transport::Bytes> {
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
    if (!Forward(spec, false)) Forward(spec, true);
    return;
  }
  queue_.push_back(std::move(spec));
  Dispatch();
}

bool NodeManager::Forward(TaskSpec& spec, bool by_total) {
  std::optional<std::uint32_t> best;
  double best_cpus = -1;
  for (std::uint32_t node = 0; node < nodes_.size(); ++node) {
    if (node == config_.node_id) continue;
    const auto& resources = by_total ? nodes_[node].total : node_available_[node];
    if (!sched::Fits(spec.resources, resources)) continue;
    const double cpus = resources.contains("CPU") ? resources.at("CPU") : 0.0;
    if (cpus > best_cpus) {
      best_cpus = cpus;
      best = node;
    }
  }
  if (!best) return false;
  // Assume it is taken until the node's next update says otherwise.
  if (!by_total) sched::Subtract(node_available_[*best], spec.resources);
  spec.hops++;
  const auto message = Encode(spec);
  const Status sent = transport_.Send(nodes_[*best].rank, kSubmitTask, message);
  if (!sent.ok()) {
    Route(OutcomeFor(spec, OutcomeKind::kSystemError,
                     "cannot hand the task to node " + std::to_string(*best) + ": " +
                         sent.message()));
  }
  return true;
}

void NodeManager::Dispatch() {
  if (stopping_.load() || nodes_.empty()) return;
  std::uint32_t waiting_for_worker = 0;
  for (auto task = queue_.begin(); task != queue_.end();) {
    if (!sched::Fits(task->resources, available_)) {
      // Another node has room now: spill the task there rather than wait.
      if (task->hops < 2 && Forward(*task, false)) {
        task = queue_.erase(task);
      } else {
        ++task;
      }
      continue;
    }
    if (idle_.empty()) {
      ++waiting_for_worker;
      ++task;
      continue;
    }
    const double gpus = task->resources.contains("GPU") ? task->resources.at("GPU") : 0.0;
    auto devices = gpus_.Acquire(gpus);
    if (!devices) {
      ++task;
      continue;
    }
    const std::uint32_t worker = idle_.back();
    idle_.pop_back();
    sched::Subtract(available_, task->resources);
    dirty_ = true;
    task->visible_devices = gpus > 0 ? sched::DeviceList(*devices) : std::string();
    const auto message = Encode(*task);
    WorkerState& state = workers_[worker];
    state.devices = *devices;
    state.running = std::move(*task);
    task = queue_.erase(task);
    const Status sent = transport_.Send(worker, kExecuteTask, message);
    if (!sent.ok()) {
      // The worker is going away; its exit hands the task back for a retry.
      processes_->Kill(state.pid, SIGKILL);
    }
  }
  const std::uint32_t workers = static_cast<std::uint32_t>(workers_.size());
  while (waiting_for_worker > starting_ && workers + starting_ < config_.max_workers &&
         deaths_before_start_ < 3) {
    StartWorker();
  }
}

void NodeManager::StartWorker() {
  const std::uint32_t rank =
      kFirstWorkerRank + config_.node_id * kWorkersPerNodeLimit + (next_worker_++ % kWorkersPerNodeLimit);
  auto address = transport_.LocalAddress(false);
  if (!address.ok()) {
    FailQueued(OutcomeKind::kSystemError, "cannot start a worker: " + address.status().message());
    return;
  }
  std::vector<std::string> environment;
  for (char** variable = environ; *variable != nullptr; ++variable) {
    const std::string_view entry(*variable);
    if (entry.starts_with("SRAY_WORKER_")) continue;
    environment.emplace_back(entry);
  }
  environment.push_back("SRAY_WORKER_RANK=" + std::to_string(rank));
  environment.push_back("SRAY_WORKER_MANAGER_RANK=" + std::to_string(config_.rank));
  environment.push_back("SRAY_WORKER_MANAGER_ADDRESS=" + Hex(*address));
  environment.push_back("SRAY_WORKER_SECRET=" + Hex(config_.secret));
  environment.push_back("SRAY_WORKER_PARENT=" + std::to_string(::getpid()));
  auto pid = processes_->Spawn(config_.executable, config_.arguments, environment);
  if (!pid.ok()) {
    FailQueued(OutcomeKind::kSystemError, "cannot start a worker on node " +
                                              std::to_string(config_.node_id) + ": " +
                                              pid.status().message());
    return;
  }
  workers_[rank] = WorkerState{.pid = *pid, .registered = false, .running = {}, .devices = {}};
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
  if (found == workers_.end() || !found->second.running) return;
  WorkerState& state = found->second;
  const TaskSpec& spec = *state.running;
  sched::Add(available_, spec.resources);
  const double gpus = spec.resources.contains("GPU") ? spec.resources.at("GPU") : 0.0;
  gpus_.Release(state.devices, gpus);
  state.devices.clear();
  state.running.reset();
  dirty_ = true;
  idle_.push_back(worker_rank);
  Route(std::move(outcome));
  Dispatch();
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
  if (!state.registered) {
    if (starting_ > 0) --starting_;
    ++deaths_before_start_;
    if (deaths_before_start_ >= 3 && !ever_registered_) {
      FailQueued(OutcomeKind::kSystemError,
                 "workers of node " + std::to_string(config_.node_id) +
                     " end before they start (last: " + how + "): the program must call "
                     "sray::Init(argc, argv) at the top of main, before anything that can fail "
                     "or exit; see the job's output for the workers' own messages");
      return;
    }
  }
  if (state.running) {
    const TaskSpec& spec = *state.running;
    sched::Add(available_, spec.resources);
    const double gpus = spec.resources.contains("GPU") ? spec.resources.at("GPU") : 0.0;
    gpus_.Release(state.devices, gpus);
    dirty_ = true;
    TaskOutcome outcome = OutcomeFor(
        spec, OutcomeKind::kWorkerDied,
        "its worker (pid " + std::to_string(pid) + ") on node " + std::to_string(config_.node_id) +
            " died with " + how + " while running it");
    outcome.pid = pid;
    Route(std::move(outcome));
  }
  Dispatch();
}

void NodeManager::FailQueued(OutcomeKind kind, const std::string& message) {
  std::deque<TaskSpec> failed;
  failed.swap(queue_);
  for (const auto& spec : failed) Route(OutcomeFor(spec, kind, message));
}

void NodeManager::Route(TaskOutcome outcome) {
  Owner* owner = local_owner_.load();
  if (owner != nullptr && outcome.owner_rank == config_.rank) {
    owner->OnTaskOutcome(std::move(outcome));
    return;
  }
  const std::uint32_t destination =
      outcome.owner_node == config_.node_id ? outcome.owner_rank : RankOfNode(outcome.owner_node);
  const auto message = Encode(outcome);
  // A failed send means the owner is gone, and with it everyone who could
  // use the result; a stored value is then freed.
  const Status sent = transport_.Send(destination, kTaskOutcome, message);
  if (!sent.ok() && static_cast<OutcomeKind>(outcome.kind) == OutcomeKind::kStoredValue &&
      outcome.node == config_.node_id) {
    store_->Free(outcome.return_id);
  }
}

std::chrono::milliseconds NodeManager::BroadcastIfDirty() {
  if (!dirty_ || nodes_.empty() || stopping_.load()) return std::chrono::milliseconds(0);
  const auto now = std::chrono::steady_clock::now();
  constexpr auto kPeriod = std::chrono::milliseconds(2);
  if (now - last_broadcast_ < kPeriod) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(kPeriod - (now - last_broadcast_)) +
           std::chrono::milliseconds(1);
  }
  dirty_ = false;
  last_broadcast_ = now;
  const auto message = Encode(ResourceUpdate{.node_id = config_.node_id,
                                             .available = available_,
                                             .queued = static_cast<std::uint32_t>(queue_.size())});
  for (const auto& node : nodes_) {
    if (node.node_id != config_.node_id) (void)transport_.Send(node.rank, kResourceUpdate, message);
  }
  return std::chrono::milliseconds(0);
}

// ---- objects (any thread) ----

Result<std::string> NodeManager::MakeLocal(const ObjectId& id, std::uint32_t holder,
                                           std::uint64_t size) {
  if (holder == config_.node_id || store_->Contains(id)) {
    auto path = store_->Locate(id);
    if (!path.ok()) return path.status();
    return path->string();
  }
  std::lock_guard fetch(fetch_mutex_);
  if (store_->Contains(id)) {
    auto path = store_->Locate(id);
    if (!path.ok()) return path.status();
    return path->string();
  }
  const std::uint32_t holder_rank = RankOfNode(holder);
  const auto request = Encode(ObjectRequest{.id = id, .size = size, .node = config_.node_id, .owner_rank = 0});
  auto reply = transport_.Call(holder_rank, kPinForPull, request);
  if (!reply.ok()) {
    return reply.status().WithContext("cannot reach object " + id.ToString() + " on node " +
                                      std::to_string(holder));
  }
  auto source = Decode<PullSource>(*reply, "pull source");
  if (!source.ok()) return source.status();
  auto unpin = [&] { (void)transport_.Send(holder_rank, kUnpinForPull, request); };
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
  loop_->Post([this, id, holders = std::move(holders)] {
    for (const auto node : holders) {
      (void)transport_.Send(RankOfNode(node), kFreeObject, Encode(FreeObject{.id = id, .node = node}));
    }
  });
}

}  // namespace sray::core
