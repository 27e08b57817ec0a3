#include "core/worker_main.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <mutex>

#include "core/actor_client.h"
#include "core/actor_host.h"
#include "core/head_service.h"
#include "core/owner.h"
#include "core/process_runtime.h"
#include "core/protocol.h"
#include "core/task_execution.h"
#include "jobsetup/task_environment.h"
#include "transport/transport.h"
#include "transport/ucx_handles.h"

namespace sray::core {
namespace {

// How long a worker polls for its next task before it sleeps: about a round
// trip through its node manager under load.
constexpr std::chrono::microseconds kDriveBetweenTasks{100};

[[noreturn]] void Die(const std::string& message) {
  std::cerr << "sray: worker " << ::getpid() << ": " << message << "\n";
  std::_Exit(1);
}

std::string TakeVariable(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) Die(std::string("missing ") + name + ": workers are started by sray");
  std::string text(value);
  ::unsetenv(name);
  return text;
}

transport::Bytes FromHex(const std::string& text) {
  transport::Bytes bytes(text.size() / 2);
  for (std::size_t index = 0; index < bytes.size(); ++index) {
    bytes[index] = static_cast<std::byte>(std::stoul(text.substr(index * 2, 2), nullptr, 16));
  }
  return bytes;
}

// The worker's way to its node's store: RPCs to the node manager. Seal and
// Free are posted (owners free objects from transport handlers too, and a
// Seal must reach the manager before the outcome posted after it).
class RemoteStoreAccess final : public StoreAccess {
 public:
  RemoteStoreAccess(transport::Transport& transport, std::uint32_t manager)
      : transport_(transport), manager_(manager) {}

  Result<std::string> Create(const ObjectId& id, std::uint64_t size) override {
    return PathFrom(kCreateObject,
                    ObjectRequest{.id = id, .size = size, .node = 0, .owner_rank = 0});
  }
  void Seal(const ObjectId& id, std::uint64_t size) override {
    transport_.Post(manager_, kSealObject,
                    Encode(ObjectRequest{.id = id, .size = size, .node = 0, .owner_rank = 0}));
  }
  Result<std::string> MakeLocal(const ObjectId& id, std::uint32_t holder,
                                std::uint64_t size) override {
    return PathFrom(kMakeLocal,
                    ObjectRequest{.id = id, .size = size, .node = holder, .owner_rank = 0});
  }
  void Free(const ObjectId& id, std::uint32_t holder) override {
    transport_.Post(manager_, kFreeObject, Encode(FreeObject{.id = id, .node = holder}));
  }

 private:
  Result<std::string> PathFrom(std::uint32_t method, const ObjectRequest& request) {
    auto reply = transport_.Call(manager_, method, Encode(request), std::chrono::minutes(10));
    if (!reply.ok()) return reply.status();
    auto path = Decode<ObjectPath>(*reply, "object path");
    if (!path.ok()) return path.status();
    return path->path;
  }

  transport::Transport& transport_;
  std::uint32_t manager_;
};

}  // namespace

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "localhost";
  return name;
}

bool IsWorkerProcess() {
  return std::getenv("SRAY_WORKER_RANK") != nullptr;
}

void RunWorker() {
  const pid_t parent = static_cast<pid_t>(std::stol(TakeVariable("SRAY_WORKER_PARENT")));
  // Die with the node manager, whatever way it ends.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) std::_Exit(1);

  const auto rank = static_cast<std::uint32_t>(std::stoul(TakeVariable("SRAY_WORKER_RANK")));
  const auto manager =
      static_cast<std::uint32_t>(std::stoul(TakeVariable("SRAY_WORKER_MANAGER_RANK")));
  const transport::Bytes manager_address = FromHex(TakeVariable("SRAY_WORKER_MANAGER_ADDRESS"));
  const auto head = static_cast<std::uint32_t>(std::stoul(TakeVariable("SRAY_WORKER_HEAD_RANK")));
  const transport::Bytes head_address = FromHex(TakeVariable("SRAY_WORKER_HEAD_ADDRESS"));
  const transport::Bytes secret = FromHex(TakeVariable("SRAY_WORKER_SECRET"));
  auto environment =
      jobsetup::ReadTaskEnvironment([](const char* name) { return std::getenv(name); });
  if (!environment.ok()) Die(environment.status().message());
  const std::uint32_t node_id = environment->node_id;

  auto context = transport::UcxContext::Create("1s");
  if (!context.ok()) Die(context.status().message());
  auto worker = transport::UcxWorker::Create(*context);
  if (!worker.ok()) Die(worker.status().message());
  auto own_address = (*worker)->Address(false);
  if (!own_address.ok()) Die(own_address.status().message());

  transport::TransportOptions options;
  options.rank = rank;
  if (secret.size() != options.token.size()) Die("malformed job secret");
  std::memcpy(options.token.data(), secret.data(), secret.size());
  // Actors this process calls: their workers' addresses, from the head.
  auto book = std::make_shared<transport::AddressBook>();
  options.resolve_address = [manager, manager_address, head, head_address,
                             book](std::uint32_t peer) -> Result<transport::Bytes> {
    if (peer == manager) return manager_address;
    // Before the head's network address: a caller that is the driver sent
    // its full address (shared memory on the same node).
    if (auto entry = book->Find(peer)) return entry->address;
    if (peer == head) return head_address;
    return Status::NotFound("no address for rank " + std::to_string(peer) +
                            ": a worker reaches its node manager, the head and actors only");
  };
  options.describe_rank = [node_id, manager, book](std::uint32_t peer) {
    if (peer == manager) return "the node manager of node " + std::to_string(node_id);
    if (auto entry = book->Find(peer)) return entry->description;
    return peer == 0 ? std::string("the head (rank 0)") : "rank " + std::to_string(peer);
  };
  options.peer_alive = [parent, manager, book](std::uint32_t peer) {
    if (peer == manager) return ::getppid() == parent;
    if (auto entry = book->Find(peer)) return entry->pid <= 0 || ::kill(entry->pid, 0) == 0;
    return true;
  };
  auto created = transport::Transport::Create(std::move(options), *worker);
  if (!created.ok()) Die(created.status().message());
  std::unique_ptr<transport::Transport> transport = std::move(created).value();

  RemoteStoreAccess store(*transport, manager);
  transport::Transport* raw_transport = transport.get();
  auto owner = std::make_unique<Owner>(OwnerIdentity{.rank = rank, .node_id = node_id}, store,
                                       [raw_transport, manager](const TaskSpec& spec) {
                                         raw_transport->Post(manager, kSubmitTask, Encode(spec));
                                       });
  auto head_service = MakeRemoteHead(*transport, head, Caller{.rank = rank, .node = node_id});
  auto actor_client =
      std::make_unique<ActorClient>(*owner, *head_service, *transport, book, HostName());
  owner->SetActorClient(actor_client.get());
  SetProcessRuntime(owner.get());
  // Set once this worker's constructor has made an actor; it then serves
  // only that actor's calls.
  std::atomic<ActorHost*> actor_host{nullptr};
  transport->RegisterOneWayHandler(
      kActorCall, [&actor_host, raw_transport](std::uint32_t source, auto payload) {
        ActorHost* host = actor_host.load();
        if (host != nullptr) {
          host->Accept(source, transport::Bytes(payload.begin(), payload.end()));
          return;
        }
        auto spec = Decode<TaskSpec>(payload, "actor call");
        if (!spec.ok()) return;
        raw_transport->Post(source, kActorCallDone,
                            Encode(FailedOutcome(*spec, OutcomeKind::kSystemError,
                                                 "no actor lives in the worker it reached")));
      });

  std::mutex mutex;
  std::condition_variable arrived;
  std::deque<TaskSpec> tasks;
  // tasks.size(), readable without the lock while this thread polls.
  std::atomic<std::size_t> queued{0};
  Owner* raw_owner = owner.get();
  transport->RegisterOneWayHandler(kExecuteTask, [&](std::uint32_t, auto payload) {
    auto spec = Decode<TaskSpec>(payload, "task");
    if (!spec.ok()) return;
    {
      std::lock_guard lock(mutex);
      tasks.push_back(std::move(spec).value());
      queued.fetch_add(1);
    }
    arrived.notify_one();
    raw_owner->WakeWaiters();  // a task waiting in Get may run it meanwhile
  });
  auto run = [&](const TaskSpec& spec) {
    const TaskOutcome outcome = ExecuteTask(spec, store, node_id);
    // If the manager is gone, PR_SET_PDEATHSIG ends this process. Sent from
    // here when the progress thread sleeps: this thread drives the worker
    // between tasks (below), and waking it would cost more than the send.
    transport->Post(manager, kTaskDone, Encode(outcome), /*send_here=*/true);
  };
  owner->SetBlockingNotifier([raw_transport, manager](bool blocked) {
    raw_transport->Post(manager, blocked ? kWorkerBlocked : kWorkerUnblocked, {});
  });
  owner->SetHelper([&] {
    TaskSpec spec;
    {
      std::lock_guard lock(mutex);
      if (tasks.empty()) return false;
      spec = std::move(tasks.front());
      tasks.pop_front();
      queued.fetch_sub(1);
    }
    run(spec);
    return true;
  });
  transport->RegisterOneWayHandler(kTaskOutcome, [raw_owner](std::uint32_t, auto payload) {
    auto outcome = Decode<TaskOutcome>(payload, "task outcome");
    if (outcome.ok()) raw_owner->OnTaskOutcome(std::move(outcome).value());
  });

  const std::string address_text(reinterpret_cast<const char*>(own_address->data()),
                                 own_address->size());
  auto registered = transport->Call(
      manager, kRegisterWorker,
      Encode(WorkerRegistration{.rank = rank, .pid = ::getpid(), .address = address_text}));
  if (!registered.ok())
    Die("cannot register with the node manager: " + registered.status().message());

  while (true) {
    TaskSpec spec;
    {
      std::unique_lock lock(mutex);
      if (tasks.empty()) {
        // Between tasks this thread drives the transport for a while: the
        // next task's message is then handled here, not handed over from
        // the progress thread with a wake-up (two context switches a task).
        lock.unlock();
        (void)transport->ProgressHere([&] { return queued.load() > 0; }, kDriveBetweenTasks);
        lock.lock();
      }
      arrived.wait(lock, [&] { return !tasks.empty(); });
      spec = std::move(tasks.front());
      tasks.pop_front();
      queued.fetch_sub(1);
    }
    if (spec.kind != static_cast<std::uint8_t>(TaskKind::kActorCreation)) {
      run(spec);
      continue;
    }
    internal::ActorInstance instance;
    const TaskOutcome outcome = ConstructActor(spec, store, node_id, instance);
    std::unique_ptr<ActorHost> host;
    if (instance.object) {
      host = std::make_unique<ActorHost>(
          std::move(instance), spec.actor_id, spec.max_concurrency, store, node_id, *transport,
          [book](std::uint32_t caller, const std::string& address) {
            transport::AddressBook::Entry entry;
            entry.address.assign(
                reinterpret_cast<const std::byte*>(address.data()),
                reinterpret_cast<const std::byte*>(address.data()) + address.size());
            entry.description = "rank " + std::to_string(caller) + ", a caller of this actor";
            book->Add(caller, std::move(entry));
          });
      actor_host.store(host.get());
    }
    transport->Post(manager, kTaskDone, Encode(outcome));
    if (host) host->Serve();
  }
}

}  // namespace sray::core
