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
#include <span>

#include "common/broken_pipe.h"
#include "common/free_memory.h"
#include "common/host_name.h"
#include "core/actor_client.h"
#include "core/actor_host.h"
#include "core/borrow_links.h"
#include "core/head_service.h"
#include "core/owner.h"
#include "core/owner_after_bursts.h"
#include "core/process_runtime.h"
#include "core/protocol.h"
#include "core/task_execution.h"
#include "core/worker_launch.h"
#include "core/worker_reuse.h"
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

// The worker's way to its node's store: RPCs to the node manager. Free is
// posted (owners free objects from transport handlers too), and so is a
// Seal that only has to reach the manager before the outcome posted after it.
class RemoteStoreAccess final : public StoreAccess {
 public:
  RemoteStoreAccess(transport::Transport& transport, std::uint32_t manager, std::uint32_t node_id)
      : transport_(transport), manager_(manager), node_id_(node_id) {}

  Result<std::string> Create(const ObjectId& id, std::uint64_t size,
                             std::int32_t incarnation) override {
    return PathFrom(kCreateObject, ObjectRequest{.id = id,
                                                 .size = size,
                                                 .holder_node = 0,
                                                 .puller_node = 0,
                                                 .owner_rank = 0,
                                                 .incarnation = incarnation});
  }
  Status Seal(const ObjectId& id, std::uint64_t size, std::int32_t incarnation,
              SealWait wait) override {
    const ObjectRequest request{.id = id,
                                .size = size,
                                .holder_node = 0,
                                .puller_node = 0,
                                .owner_rank = 0,
                                .incarnation = incarnation};
    if (wait == SealWait::kBeforeNextManagerMessage) {
      transport_.Post(manager_, kSealObject, Encode(request));
      return Status::Ok();
    }
    const Status sealed =
        transport_.Call(manager_, kSealObjectAndAnswer, Encode(request), std::chrono::minutes(10))
            .status();
    if (!sealed.ok() && sealed.code() != StatusCode::kNotFound) {
      // Unanswered, the entry may stay created and unsealed: this attempt's
      // entry goes (a retry's, made since, stays).
      transport_.Post(manager_, kDiscardOrphan,
                      Encode(OrphanedResult{.id = id,
                                            .node = node_id_,
                                            .made_by = transport_.rank(),
                                            .actor_id = 0,
                                            .incarnation = incarnation}));
    }
    return sealed;
  }
  Result<std::string> MakeLocal(const ObjectId& id, std::uint32_t holder,
                                std::uint64_t size) override {
    return PathFrom(
        kMakeLocal,
        ObjectRequest{
            .id = id, .size = size, .holder_node = holder, .puller_node = 0, .owner_rank = 0});
  }
  void Free(const ObjectId& id, std::uint32_t holder) override {
    transport_.Post(manager_, kFreeObject, Encode(FreeObject{.id = id, .node = holder}));
  }
  void DiscardOrphan(const OrphanedResult& orphan) override {
    transport_.Post(manager_, kDiscardOrphan, Encode(orphan));
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
  std::uint32_t node_id_;
};

// Tasks the node manager sent, waiting for this worker's main thread (or
// for a task of its own that waits in Get and runs them meanwhile).
class TaskInbox {
 public:
  void Push(TaskSpec spec) {
    {
      std::lock_guard lock(mutex_);
      tasks_.push_back(std::move(spec));
      queued_.fetch_add(1);
    }
    arrived_.notify_one();
  }
  // Without waiting; false when none is queued.
  bool TryPop(TaskSpec& spec) {
    std::lock_guard lock(mutex_);
    if (tasks_.empty()) return false;
    TakeFrontLocked(spec);
    return true;
  }
  // Waits for a task. While none is queued, this thread first drives the
  // transport for a while: the next task's message is then handled here,
  // not handed over from the progress thread with a wake-up (two context
  // switches a task).
  TaskSpec Pop(transport::Transport& transport) {
    TaskSpec spec;
    std::unique_lock lock(mutex_);
    if (tasks_.empty()) {
      lock.unlock();
      (void)transport.ProgressHere([this] { return queued_.load() > 0; }, kDriveBetweenTasks);
      lock.lock();
    }
    arrived_.wait(lock, [this] { return !tasks_.empty(); });
    TakeFrontLocked(spec);
    return spec;
  }

 private:
  void TakeFrontLocked(TaskSpec& spec) {
    spec = std::move(tasks_.front());
    tasks_.pop_front();
    queued_.fetch_sub(1);
  }

  std::mutex mutex_;
  std::condition_variable arrived_;
  std::deque<TaskSpec> tasks_;  // guarded by mutex_
  // tasks_.size(), readable without the lock while a thread polls.
  std::atomic<std::size_t> queued_{0};
};

// The worker's transport: it reaches its node manager, the head, and the
// actors it calls (their addresses arrive in `book`).
std::unique_ptr<transport::Transport> ConnectWorker(
    const WorkerLaunch& launch, std::uint32_t node_id,
    const std::shared_ptr<transport::AddressBook>& book) {
  auto context = transport::UcxContext::Create("1s");
  if (!context.ok()) Die(context.status().message());
  auto worker = transport::UcxWorker::Create(*context);
  if (!worker.ok()) Die(worker.status().message());

  transport::TransportOptions options;
  options.rank = launch.rank;
  options.token = launch.secret;
  const std::uint32_t manager = launch.manager_rank;
  options.resolve_address = [manager, manager_address = launch.manager_address,
                             head = launch.head_rank, head_address = launch.head_address,
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
  options.peer_alive = [parent = launch.parent, manager, book](std::uint32_t peer) {
    if (peer == manager) return ::getppid() == parent;
    if (auto entry = book->Find(peer)) return entry->pid <= 0 || ::kill(entry->pid, 0) == 0;
    return true;
  };
  auto created = transport::Transport::Create(std::move(options), *worker);
  if (!created.ok()) Die(created.status().message());
  return std::move(created).value();
}

// The actor this worker serves, if any, for the transport's handlers (calls
// and Kill arrive on the progress thread). Accept and Retire run under the
// lock, so the main thread can take the host away and destroy it.
class ServedActor {
 public:
  void Set(ActorHost* host) {
    std::lock_guard lock(mutex_);
    host_ = host;
  }
  // False when no actor lives here; the call is then the caller's to answer.
  bool Accept(std::uint32_t caller, std::span<const std::byte> payload) {
    std::lock_guard lock(mutex_);
    if (host_ == nullptr) return false;
    host_->Accept(caller, transport::Bytes(payload.begin(), payload.end()));
    return true;
  }
  // Retires the actor `kill` names if it lives here; ends the process when
  // a call of it runs (a Kill must not wait for a call) or code in it asked
  // to end with the actor (then as a killed process: no destructor runs).
  void Retire(const ActorKill& kill) {
    std::lock_guard lock(mutex_);
    if (host_ == nullptr || host_->actor_id() != kill.id || host_->incarnation() != kill.incarnation) {
      return;
    }
    if (ProcessEndsWithActor() || !host_->Retire()) std::_Exit(0);
    retiring_ = kill;
  }
  // The Kill that made Serve return.
  ActorKill retired() {
    std::lock_guard lock(mutex_);
    return retiring_;
  }

 private:
  std::mutex mutex_;
  ActorHost* host_ = nullptr;  // owned by ServeActor, on the main thread
  ActorKill retiring_;
};

// Runs an actor's constructor. When it makes the actor, serves that actor's
// calls until Kill retires it, then destroys the instance and returns when
// the process can serve again (the node manager then counts the worker as
// idle), or ends the process when it cannot (worker_reuse.h). When the
// constructor fails, returns, and the node manager hands the worker
// ordinary tasks again.
void ServeActor(const TaskSpec& constructor, StoreAccess& store, std::uint32_t node_id,
                transport::Transport& transport, std::uint32_t manager, ServedActor& served,
                RetiredActors& retired, const std::shared_ptr<transport::AddressBook>& book) {
  const ProcessSnapshot before = TakeProcessSnapshot();
  internal::ActorInstance instance;
  const TaskOutcome outcome = ConstructActor(constructor, store, node_id, instance);
  std::unique_ptr<ActorHost> host;
  if (instance.object) {
    host = std::make_unique<ActorHost>(
        std::move(instance), constructor.actor_id, constructor.incarnation,
        constructor.max_concurrency, store, node_id, transport, manager,
        [book](std::uint32_t caller, const std::string& address) {
          transport::AddressBook::Entry entry;
          entry.address = transport::BytesOf(address);
          entry.description = "rank " + std::to_string(caller) + ", a caller of this actor";
          book->Add(caller, std::move(entry));
        },
        [&retired](std::uint64_t actor_id) { return retired.Contains(actor_id); });
    served.Set(host.get());
  }
  transport.Post(manager, kTaskDone, Encode(outcome));
  if (!host) return;
  host->Serve();
  // Before the host goes: a call arriving between the two is dropped, not
  // answered "no actor lives here".
  retired.Add(constructor.actor_id);
  served.Set(nullptr);
  RunWithin(kDestructorLimit, [&host] { host.reset(); });
  auto why = WhyNotReusable(before, TakeProcessSnapshot(), ProcessEndsWithActor());
  if (why) {
    // Pages the allocator kept after the destructor count as resident:
    // handed back only when they decide (a purge costs more than the check).
    ReturnFreedMemoryToTheSystem();
    why = WhyNotReusable(before, TakeProcessSnapshot(), ProcessEndsWithActor());
  }
  if (why) {
    std::cerr << "sray: worker " << ::getpid() << ": the process of actor " << constructor.actor_id
              << " ends with it, not reused for the next actor: " << *why << "\n";
    std::_Exit(0);
  }
  transport.Post(manager, kActorRetired, Encode(served.retired()));
}

}  // namespace

bool IsWorkerProcess() {
  return IsWorkerLaunch([](const char* name) { return std::getenv(name); });
}

namespace {
// Set before the launch variables that IsWorkerProcess reads are cleared:
// code in a task asking IsInitialized, or calling Init, is in a running
// worker.
std::atomic<bool> worker_running{false};
}  // namespace

bool WorkerRunning() {
  return worker_running.load(std::memory_order_acquire);
}

void RunWorker() {
  auto launch = ReadWorkerLaunch([](const char* name) { return std::getenv(name); });
  if (!launch.ok()) Die(launch.status().message());
  worker_running.store(true, std::memory_order_release);
  ClearWorkerLaunchVariables();
  // Die with the node manager, whatever way it ends.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != launch->parent) std::_Exit(1);
  // Output goes to a pipe (core/worker_output.h): line by line, as in a
  // terminal, not in 4 KiB blocks that a crash would lose.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  // A peer that goes away (a training group's Gloo socket, the node
  // manager's end of the output pipe) must fail the write that reached it,
  // not end this worker (common/broken_pipe.h).
  FailWritesToClosedPipes();
  auto environment =
      jobsetup::ReadTaskEnvironment([](const char* name) { return std::getenv(name); });
  if (!environment.ok()) Die(environment.status().message());
  const std::uint32_t node_id = environment->node_id;
  const std::uint32_t rank = launch->rank;
  const std::uint32_t manager = launch->manager_rank;

  auto book = std::make_shared<transport::AddressBook>();
  std::unique_ptr<transport::Transport> transport = ConnectWorker(*launch, node_id, book);
  auto own_address = transport->LocalAddress(false);
  if (!own_address.ok()) Die(own_address.status().message());

  RemoteStoreAccess store(*transport, manager, node_id);
  transport::Transport* raw_transport = transport.get();
  auto owner = std::make_unique<Owner>(OwnerIdentity{.rank = rank, .node_id = node_id}, store,
                                       [raw_transport, manager](const TaskSpec& spec) {
                                         raw_transport->Post(manager, kSubmitTask, Encode(spec));
                                       });
  owner->SetMaxTasksInFlight(MaxTasksInFlightOfJob());
  const OwnerAfterBursts owner_after_bursts(*transport, *owner);
  auto head_service =
      MakeRemoteHead(*transport, launch->head_rank, Caller{.rank = rank, .node = node_id});
  auto actor_client =
      std::make_unique<ActorClient>(*owner, *head_service, *transport, book, HostName());
  owner->SetActorCalls(actor_client.get());
  // References inside values: this worker borrows them from their owners
  // and lends its own (the process ends by _exit, never unwinding these).
  TransportBorrowLinks borrow_links(*transport, book);
  owner->SetBorrowLinks(borrow_links);
  const OwnerService owner_service(*transport, *owner, manager, book);
  SetProcessRuntime(owner.get());
  // Set while this worker's constructor has made an actor; it then serves
  // only that actor's calls.
  ServedActor served;
  RetiredActors retired(kRetiredActorsKept);
  transport->RegisterOneWayHandler(
      kActorCall, [&served, &retired, raw_transport](std::uint32_t source, auto payload) {
        if (served.Accept(source, payload)) return;
        auto spec = Decode<TaskSpec>(payload, "actor call");
        if (!spec.ok() || retired.Contains(spec->actor_id)) return;
        raw_transport->Post(source, kActorCallDone,
                            Encode(FailedOutcome(*spec, OutcomeKind::kSystemError,
                                                 "no actor lives in the worker it reached")));
      });
  transport->RegisterOneWayHandler(kRetireActor, [&served, manager](std::uint32_t source, auto payload) {
    if (source != manager) return;
    auto kill = Decode<ActorKill>(payload, "actor retirement");
    if (kill.ok()) served.Retire(*kill);
  });

  Owner* raw_owner = owner.get();
  // Idle above the node's pool size: this process may end only when it owns
  // nothing, or objects others hold would be lost with it.
  transport->RegisterOneWayHandler(
      kMayWorkerEnd, [raw_owner, raw_transport, manager](std::uint32_t source, auto) {
        if (source != manager) return;
        raw_transport->Post(manager, kWorkerEndReply,
                            Encode(WorkerEndReply{.owned_objects = raw_owner->counts().owned}));
      });

  TaskInbox inbox;
  transport->RegisterOneWayHandler(kExecuteTask, [&inbox, raw_owner](std::uint32_t, auto payload) {
    auto spec = Decode<TaskSpec>(payload, "task");
    if (!spec.ok()) return;
    inbox.Push(std::move(spec).value());
    raw_owner->WakeWaiters();  // a task waiting in Get may run it meanwhile
  });
  auto run = [&](const TaskSpec& spec) {
    const TaskOutcome outcome = ExecuteTask(spec, store, node_id);
    // If the manager is gone, PR_SET_PDEATHSIG ends this process. Sent from
    // here when the progress thread sleeps: this thread drives the worker
    // between tasks (TaskInbox::Pop), and waking it would cost more than
    // the send.
    transport->Post(manager, kTaskDone, Encode(outcome), /*send_here=*/true);
  };
  owner->SetBlockingNotifier([raw_transport, manager](bool blocked) {
    raw_transport->Post(manager, blocked ? kWorkerBlocked : kWorkerUnblocked, {});
  });
  owner->SetHelper([&] {
    TaskSpec spec;
    if (!inbox.TryPop(spec)) return false;
    run(spec);
    return true;
  });

  auto registered = transport->Call(
      manager, kRegisterWorker,
      Encode(WorkerRegistration{.rank = rank,
                                .pid = ::getpid(),
                                .address = std::string(transport::TextOf(*own_address))}));
  if (!registered.ok())
    Die("cannot register with the node manager: " + registered.status().message());

  while (true) {
    TaskSpec spec = inbox.Pop(*transport);
    if (spec.kind == TaskKind::kActorCreation) {
      ServeActor(spec, store, node_id, *transport, manager, served, retired, book);
    } else {
      run(spec);
    }
  }
}

}  // namespace sray::core
