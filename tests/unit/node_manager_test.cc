// The node manager over a real transport and object store, without worker
// processes: where outcomes go (an owner on its node by kOwnerOutcome, the
// owner's node manager by kTaskOutcome), and a worker that cannot start.

#include "core/node_manager.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "transport/transport.h"
#include "transports_by_rank.h"

namespace sray::core {
namespace {

class NodeManagerTest : public ::testing::Test {
 protected:
  NodeManagerTest() {
    manager_transport_ = MakeTransport(kManagerRank);
    owner_transport_ = MakeTransport(kOwnerRank);
    other_manager_transport_ = MakeTransport(kOtherManagerRank);
    spill_ = std::filesystem::temp_directory_path() /
             ("sray-node-manager-test-" + std::to_string(::getpid()));
  }
  ~NodeManagerTest() override {
    manager_.reset();
    std::filesystem::remove_all(spill_);
  }

  // Node 0 (this manager, 1 CPU) and node 1 (another manager's rank).
  void StartManager(const std::string& executable) {
    NodeManagerConfig config;
    config.node_id = 0;
    config.rank = kManagerRank;
    config.hostname = "test-node";
    config.total = {{"CPU", 1.0}};
    config.max_workers = 1;
    config.store.name_prefix = "sray.nmtest" + std::to_string(::getpid()) + ".0.n0";
    config.store.spill_directory = spill_;
    config.store.capacity = 16 << 20;
    config.store.node_id = 0;
    config.executable = executable;
    config.head_rank = kManagerRank;
    auto manager = NodeManager::Create(config, *manager_transport_,
                                       std::make_shared<transport::AddressBook>());
    ASSERT_TRUE(manager.ok()) << manager.status().message();
    manager_ = std::move(manager).value();
    ClusterView view;
    view.nodes.push_back(manager_->Description());
    view.nodes.push_back(OtherNode(1, kOtherManagerRank, {{"CPU", 1.0}}));
    manager_->ApplyClusterView(view);
  }

  // A node of the view other than this manager's.
  static NodeDescription OtherNode(std::uint32_t node_id, std::uint32_t rank, ResourceMap total) {
    return NodeDescription{.node_id = node_id,
                           .rank = rank,
                           .hostname = "node-" + std::to_string(node_id),
                           .total = std::move(total),
                           .store_capacity = 16 << 20};
  }

  // The next `Message` that `transport` receives as `method`.
  template <typename Message>
  static std::future<Message> NextMessage(transport::Transport& transport, std::uint32_t method) {
    auto promise = std::make_shared<std::promise<Message>>();
    auto once = std::make_shared<std::once_flag>();
    transport.RegisterOneWayHandler(
        method, [promise, once](std::uint32_t, std::span<const std::byte> payload) {
          auto message = Decode<Message>(payload, "test message");
          if (!message.ok()) return;
          std::call_once(*once, [&] { promise->set_value(std::move(message).value()); });
        });
    return promise->get_future();
  }
  static std::future<TaskOutcome> NextOutcome(transport::Transport& transport,
                                              std::uint32_t method) {
    return NextMessage<TaskOutcome>(transport, method);
  }

  static TaskSpec TaskOf(std::uint32_t owner_rank, std::uint32_t owner_node, double cpus) {
    TaskSpec spec;
    spec.task_id = 1;
    spec.return_id = ObjectId{owner_rank, 1};
    spec.function = "f";
    spec.owner_rank = owner_rank;
    spec.owner_node = owner_node;
    spec.resources = {{"CPU", cpus}};
    return spec;
  }

  static constexpr std::uint32_t kManagerRank = 0;
  static constexpr std::uint32_t kOwnerRank = 1;
  static constexpr std::uint32_t kOtherManagerRank = 2;

  std::unique_ptr<transport::Transport> MakeTransport(std::uint32_t rank) {
    return transports_.Make(rank);
  }

  TransportsByRank transports_;  // outlives the transports below
  std::unique_ptr<transport::Transport> manager_transport_;
  std::unique_ptr<transport::Transport> owner_transport_;
  std::unique_ptr<transport::Transport> other_manager_transport_;
  std::filesystem::path spill_;
  std::unique_ptr<NodeManager> manager_;
};

// Writes `size` bytes into the file a kCreateObject reply names.
void FillCreatedObject(const transport::Bytes& created, std::uint64_t size) {
  auto path = Decode<ObjectPath>(created, "object path");
  ASSERT_TRUE(path.ok()) << path.status().message();
  std::ofstream file(path->path, std::ios::binary);
  file << std::string(size, 'x');
  ASSERT_TRUE(file.flush()) << path->path;
}

TEST_F(NodeManagerTest, AnOutcomeForAnOwnerOnItsNodeGoesToTheOwner) {
  StartManager("/nonexistent/sray-worker");
  auto outcome = NextOutcome(*owner_transport_, kOwnerOutcome);
  manager_->Submit(TaskOf(kOwnerRank, 0, 64.0));  // no node has 64 CPUs
  ASSERT_EQ(outcome.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  const TaskOutcome received = outcome.get();
  EXPECT_EQ(static_cast<OutcomeKind>(received.kind), OutcomeKind::kInfeasible);
  EXPECT_EQ(received.task_id, 1U);
}

TEST_F(NodeManagerTest, AnOutcomeForAnOwnerOnAnotherNodeGoesToThatNodesManager) {
  StartManager("/nonexistent/sray-worker");
  auto outcome = NextOutcome(*other_manager_transport_, kTaskOutcome);
  manager_->Submit(TaskOf(7, 1, 64.0));
  ASSERT_EQ(outcome.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  const TaskOutcome received = outcome.get();
  EXPECT_EQ(received.owner_rank, 7U);
  EXPECT_EQ(static_cast<OutcomeKind>(received.kind), OutcomeKind::kInfeasible);
}

// It looped forever before: a failed spawn left the task queued for a
// worker that never came.
TEST_F(NodeManagerTest, ATaskWhoseWorkerCannotStartFailsWithTheReason) {
  StartManager("/nonexistent/sray-worker");
  auto outcome = NextOutcome(*owner_transport_, kOwnerOutcome);
  manager_->Submit(TaskOf(kOwnerRank, 0, 1.0));
  ASSERT_EQ(outcome.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  const TaskOutcome received = outcome.get();
  EXPECT_NE(static_cast<OutcomeKind>(received.kind), OutcomeKind::kInlineValue);
  EXPECT_NE(received.error_message.find("/nonexistent/sray-worker"), std::string::npos)
      << received.error_message;
}

// An actor call's result whose process is gone, named by the caller: the
// manager frees it only where that attempt (the process's rank and the
// actor's incarnation) made it; requests naming another process or another
// incarnation (a retry's result of the same id) leave it.
TEST_F(NodeManagerTest, AnOrphanedResultIsFreedOnlyWhereThatAttemptMadeIt) {
  StartManager("/nonexistent/sray-worker");
  // The "actor's process" here is the owner's transport (rank 1): not a
  // worker of this node, as a process whose exit was seen.
  auto make = [&](const ObjectId& id, std::uint64_t size, std::int32_t incarnation) {
    const ObjectRequest request{.id = id,
                                .size = size,
                                .holder_node = 0,
                                .puller_node = 0,
                                .owner_rank = 0,
                                .incarnation = incarnation};
    auto created = owner_transport_->Call(kManagerRank, kCreateObject, Encode(request));
    ASSERT_TRUE(created.ok()) << created.status().message();
    owner_transport_->Post(kManagerRank, kSealObject, Encode(request));
  };
  auto usage = [&]() -> StoreUsage {
    auto reply = owner_transport_->Call(kManagerRank, kStoreUsage, {});
    EXPECT_TRUE(reply.ok());
    return reply.ok() ? *Decode<StoreUsage>(*reply, "usage") : StoreUsage{};
  };
  auto objects = [&]() { return usage().objects; };
  auto discard = [&](const ObjectId& id, std::uint32_t made_by, std::int32_t incarnation) {
    owner_transport_->Post(
        kManagerRank, kDiscardOrphan,
        Encode(OrphanedResult{
            .id = id, .node = 0, .made_by = made_by, .actor_id = 5, .incarnation = incarnation}));
  };
  auto wait_for = [&](std::uint64_t count) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (objects() != count && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return objects();
  };
  const ObjectId retried{3, 1};
  const ObjectId orphaned{3, 2};
  make(retried, 200'000, 2);
  make(orphaned, 300'000, 0);
  ASSERT_EQ(wait_for(2), 2u);
  discard(retried, kOtherManagerRank, 2);  // another process
  discard(retried, kOwnerRank, 1);         // an earlier incarnation's attempt
  discard(orphaned, kOwnerRank, 0);        // served after the two above
  EXPECT_EQ(wait_for(1), 1u) << "the orphaned result stayed";
  EXPECT_EQ(usage().in_memory, 200'000u) << "a result of another attempt was freed";
  discard(retried, kOwnerRank, 2);
  EXPECT_EQ(wait_for(0), 0u);
}

// Two nodes pulling from each other at once: node 0's manager pulls an
// object from node 1 (and waits for node 1's pin) while node 1 asks node 0
// to pin one of its objects before it answers. Before, node 0 served pins on
// the same executor as its own pulls, so node 1's request waited behind the
// pull that waited for node 1: both hung until the 60 s call timeout.
TEST_F(NodeManagerTest, APinIsAnsweredWhileThisNodesOwnPullWaitsOnThatPeer) {
  StartManager("/nonexistent/sray-worker");
  // An object of node 0's store, sealed: what node 1 will ask node 0 to pin.
  const ObjectRequest held{.id = ObjectId{kOwnerRank, 5}, .size = 4096, .holder_node = 0,
                           .puller_node = 1, .owner_rank = kOwnerRank};
  const auto created = owner_transport_->Call(kManagerRank, kCreateObject, Encode(held));
  ASSERT_TRUE(created.ok()) << created.status().message();
  FillCreatedObject(*created, held.size);
  ASSERT_TRUE(owner_transport_->Send(kManagerRank, kSealObject, Encode(held)).ok());

  // Node 1 answers node 0's pin only after its own pin at node 0 is answered.
  std::promise<Status> inner_pin;
  auto inner = inner_pin.get_future();
  std::thread asker;
  other_manager_transport_->RegisterDeferredRequestHandler(
      kPinForPull, [&](std::uint32_t, auto, const transport::Responder& responder) {
        asker = std::thread([&, responder] {
          const auto answered = other_manager_transport_->Call(
              kManagerRank, kPinForPull, Encode(held), std::chrono::milliseconds(5000));
          inner_pin.set_value(answered.status());
          responder.Reply(Status::NotFound("the test's node 1 holds nothing"));
        });
      });
  const ObjectRequest pull{.id = ObjectId{kOwnerRank, 6}, .size = 4096, .holder_node = 1,
                           .puller_node = 0, .owner_rank = kOwnerRank};
  const auto pulled = owner_transport_->Call(kManagerRank, kMakeLocal, Encode(pull),
                                             std::chrono::milliseconds(20000));
  ASSERT_EQ(inner.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  asker.join();
  const Status inner_status = inner.get();
  EXPECT_TRUE(inner_status.ok()) << "node 0 did not answer node 1's pin while its pull waited: "
                                 << inner_status.message();
  EXPECT_FALSE(pulled.ok());  // node 1 held nothing
  (void)owner_transport_->Send(kManagerRank, kUnpinForPull, Encode(held));
}

// An actor's worker answers its caller directly, so its result must be
// readable by a pull from another node once the seal is answered; a seal
// from an attempt that did not create the object is refused and leaves it
// unreadable.
TEST_F(NodeManagerTest, AnAnsweredSealMakesTheObjectPullableAndAnotherAttemptsIsRefused) {
  StartManager("/nonexistent/sray-worker");
  const ObjectRequest made{.id = ObjectId{kOwnerRank, 7},
                           .size = 4096,
                           .holder_node = 0,
                           .puller_node = 1,
                           .owner_rank = kOwnerRank,
                           .incarnation = 3};
  const auto created = owner_transport_->Call(kManagerRank, kCreateObject, Encode(made));
  ASSERT_TRUE(created.ok()) << created.status().message();
  FillCreatedObject(*created, made.size);
  auto pin = [&] {
    return other_manager_transport_->Call(kManagerRank, kPinForPull, Encode(made),
                                          std::chrono::milliseconds(5000));
  };
  EXPECT_EQ(pin().status().code(), StatusCode::kNotFound) << "readable before its seal";

  ObjectRequest earlier = made;
  earlier.incarnation = 2;
  const auto refused = owner_transport_->Call(kManagerRank, kSealObjectAndAnswer, Encode(earlier));
  EXPECT_EQ(refused.status().code(), StatusCode::kNotFound) << refused.status().message();
  EXPECT_EQ(pin().status().code(), StatusCode::kNotFound) << "another attempt's seal counted";

  const auto sealed = owner_transport_->Call(kManagerRank, kSealObjectAndAnswer, Encode(made));
  ASSERT_TRUE(sealed.ok()) << sealed.status().message();
  const auto pinned = pin();
  EXPECT_TRUE(pinned.ok()) << pinned.status().message();
  (void)other_manager_transport_->Send(kManagerRank, kUnpinForPull, Encode(made));
}

// A worker that ended took with it the only way to read what it owned (a
// Get asks the owner): its node manager tells every node, and each frees
// those objects; an actor call's result made for it afterwards is refused
// and freed at its seal. Objects of other owners stay.
TEST_F(NodeManagerTest, AnEndedOwnersObjectsAreFreedAndLaterResultsForItRefused) {
  StartManager("/nonexistent/sray-worker");
  constexpr std::uint32_t kEndedWorker = kFirstWorkerRank + 0x10000 + 3;  // of node 1
  auto make = [&](const ObjectId& id) {
    const ObjectRequest request{
        .id = id, .size = 4096, .holder_node = 0, .puller_node = 0, .owner_rank = 0};
    auto created = owner_transport_->Call(kManagerRank, kCreateObject, Encode(request));
    EXPECT_TRUE(created.ok()) << created.status().message();
    return request;
  };
  auto objects = [&]() -> std::uint64_t {
    auto reply = owner_transport_->Call(kManagerRank, kStoreUsage, {});
    return reply.ok() ? Decode<StoreUsage>(*reply, "usage")->objects : 0;
  };
  auto wait_for = [&](std::uint64_t count) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (objects() != count && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return objects();
  };
  owner_transport_->Post(kManagerRank, kSealObject, Encode(make(ObjectId{kEndedWorker, 1})));
  (void)make(ObjectId{kEndedWorker, 2});  // still being written
  owner_transport_->Post(kManagerRank, kSealObject, Encode(make(ObjectId{kOwnerRank, 1})));
  ASSERT_EQ(wait_for(3), 3u);

  // Only the ended worker's own node manager's word counts. (Sent, not
  // posted: the create after it is then served behind any free it queued.)
  ASSERT_TRUE(
      owner_transport_->Send(kManagerRank, kOwnerGone, Encode(OwnerGone{.rank = kEndedWorker}))
          .ok());
  owner_transport_->Post(kManagerRank, kSealObject, Encode(make(ObjectId{kOwnerRank, 2})));
  EXPECT_EQ(wait_for(4), 4u) << "another process's claim freed objects";
  other_manager_transport_->Post(kManagerRank, kOwnerGone, Encode(OwnerGone{.rank = kEndedWorker}));
  EXPECT_EQ(wait_for(2), 2u) << "the ended owner's objects stayed";

  const ObjectRequest late = make(ObjectId{kEndedWorker, 3});
  const auto sealed = owner_transport_->Call(kManagerRank, kSealObjectAndAnswer, Encode(late));
  EXPECT_EQ(sealed.status().code(), StatusCode::kNotFound);
  EXPECT_NE(sealed.status().message().find("has ended"), std::string::npos)
      << sealed.status().message();
  EXPECT_EQ(objects(), 2u) << "a result made for the ended owner stayed";

  // A task's result for it, stored here after it ended: freed when its
  // outcome passes this node's manager.
  const ObjectRequest task_result = make(ObjectId{kEndedWorker, 4});
  owner_transport_->Post(kManagerRank, kSealObject, Encode(task_result));
  ASSERT_EQ(wait_for(3), 3u);
  TaskOutcome outcome;
  outcome.kind = static_cast<std::uint8_t>(OutcomeKind::kStoredValue);
  outcome.return_id = task_result.id;
  outcome.owner_rank = kEndedWorker;
  outcome.owner_node = 0;
  outcome.node = 0;
  outcome.size = task_result.size;
  other_manager_transport_->Post(kManagerRank, kTaskOutcome, Encode(outcome));
  EXPECT_EQ(wait_for(2), 2u) << "a task's result for the ended owner stayed";
}

// A worker lends a task's result to the task's owner (Owner::Lend) before
// the outcome leaves; when that owner has ended, nobody adopts those
// registrations, and one made after the owners dropped the ended process's
// kept its object to the end of the job. The node manager gives them back.
TEST_F(NodeManagerTest, AResultForAnEndedOwnerGivesBackWhatItsWorkerLentThatOwner) {
  StartManager("/nonexistent/sray-worker");
  constexpr std::uint32_t kEndedWorker = kFirstWorkerRank + 3;  // of node 0, this one
  auto removed = NextMessage<BorrowerChange>(*owner_transport_, kRemoveBorrower);
  // As this node manager announces the end of its own worker.
  auto heard = NextMessage<OwnerGone>(*manager_transport_, kBorrowerGone);
  manager_transport_->Post(kManagerRank, kOwnerGone, Encode(OwnerGone{.rank = kEndedWorker}));
  ASSERT_EQ(heard.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  TaskOutcome outcome;
  outcome.kind = static_cast<std::uint8_t>(OutcomeKind::kInlineValue);
  outcome.return_id = ObjectId{kEndedWorker, 9};
  outcome.owner_rank = kEndedWorker;
  outcome.owner_node = 0;
  outcome.node = 1;
  outcome.value = "x";
  // The ended owner's own object went with it; the other owner's is given back.
  outcome.contained = {ContainedRef{.id = ObjectId{kEndedWorker, 2}, .owner_address = ""},
                       ContainedRef{.id = ObjectId{kOwnerRank, 5}, .owner_address = ""}};
  other_manager_transport_->Post(kManagerRank, kTaskOutcome, Encode(outcome));
  ASSERT_EQ(removed.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "the registration for the ended owner stayed";
  const BorrowerChange change = removed.get();
  EXPECT_EQ(change.id, (ObjectId{kOwnerRank, 5}));
  EXPECT_EQ(change.borrower, kEndedWorker);
  EXPECT_EQ(change.count, 1U);
}

// A worker's end, as its node manager announces it, reaches the owners on
// this node (here the manager's own rank, where the driver's owner would
// serve it), which drop that borrower's registrations.
TEST_F(NodeManagerTest, AnEndedWorkerIsPassedOnToTheOwnersHere) {
  StartManager("/nonexistent/sray-worker");
  constexpr std::uint32_t kEndedWorker = kFirstWorkerRank + 0x10000 + 4;  // of node 1
  auto gone = NextMessage<OwnerGone>(*manager_transport_, kBorrowerGone);
  other_manager_transport_->Post(kManagerRank, kOwnerGone, Encode(OwnerGone{.rank = kEndedWorker}));
  ASSERT_EQ(gone.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(gone.get().rank, kEndedWorker);
}

// The head's news of a lost node reaches the owners on this node (here the
// manager's own rank, where the driver's owner would serve it), which drop
// the registrations of that node's processes.
TEST_F(NodeManagerTest, ALostNodeIsPassedOnToTheOwnersHere) {
  StartManager("/nonexistent/sray-worker");
  auto lost = NextMessage<NodeLost>(*manager_transport_, kBorrowerNodeLost);
  // The head is this manager's rank in this test.
  manager_transport_->Post(kManagerRank, kNodeLost, Encode(NodeLost{.node = 1, .cause = "killed"}));
  ASSERT_EQ(lost.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(lost.get().node, 1U);
}

// A forwarded task that its first node moved on (kTaskMoved) is followed
// there: the loss of the node it moved to fails it, with that node's cause,
// though the node it was first sent to is alive.
TEST_F(NodeManagerTest, AMovedTaskFailsWhenTheNodeItMovedToIsLost) {
  StartManager("/nonexistent/sray-worker");
  constexpr std::uint32_t kThirdNodeRank = 3;
  ClusterView view;
  view.nodes.push_back(manager_->Description());
  view.nodes.push_back(OtherNode(1, kOtherManagerRank, {{"CPU", 1.0}, {"special", 1.0}}));
  view.nodes.push_back(OtherNode(2, kThirdNodeRank, {{"CPU", 1.0}}));
  manager_->ApplyClusterView(view);

  // Only node 1 has "special": this node forwards the task there.
  auto forwarded = NextMessage<TaskSpec>(*other_manager_transport_, kSubmitTask);
  auto outcome = NextOutcome(*owner_transport_, kOwnerOutcome);
  TaskSpec task = TaskOf(kOwnerRank, 0, 1.0);
  task.resources["special"] = 1.0;
  manager_->Submit(task);
  ASSERT_EQ(forwarded.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  const TaskSpec sent = forwarded.get();

  // Node 1 had no room after all and moved it on to node 2.
  other_manager_transport_->Post(kManagerRank, kTaskMoved,
                                 Encode(TaskMoved{.owner_rank = kOwnerRank,
                                                  .task_id = sent.task_id,
                                                  .attempt = sent.attempt,
                                                  .node = 2,
                                                  .hops = sent.hops + 1}));
  // The head is this manager's rank in this test. Either order of the two
  // messages fails the task: a move to a node already lost fails it at once.
  manager_transport_->Post(kManagerRank, kNodeLost,
                           Encode(NodeLost{.node = 2, .cause = "its node was killed"}));
  ASSERT_EQ(outcome.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "the owner never heard that its task was lost with node 2";
  const TaskOutcome received = outcome.get();
  EXPECT_EQ(received.task_id, sent.task_id);
  EXPECT_NE(received.error_message.find("its node was killed"), std::string::npos)
      << received.error_message;
}

// A worker that registers after a node was lost never got the news passed
// on: its node manager tells it when it registers.
TEST_F(NodeManagerTest, AWorkerThatRegistersAfterANodeLossIsToldOfIt) {
  StartManager("/nonexistent/sray-worker");
  auto passed_on = NextMessage<NodeLost>(*manager_transport_, kBorrowerNodeLost);
  manager_transport_->Post(kManagerRank, kNodeLost, Encode(NodeLost{.node = 1, .cause = "killed"}));
  ASSERT_EQ(passed_on.wait_for(std::chrono::seconds(10)), std::future_status::ready);

  constexpr std::uint32_t kLateWorker = kFirstWorkerRank + 7;  // of node 0, this one
  auto worker_transport = MakeTransport(kLateWorker);
  auto told = NextMessage<NodeLost>(*worker_transport, kBorrowerNodeLost);
  const WorkerRegistration registration{
      .rank = kLateWorker,
      .pid = ::getpid(),
      .address = std::string(transport::TextOf(transports_.AddressOf(kLateWorker)))};
  ASSERT_TRUE(worker_transport->Call(kManagerRank, kRegisterWorker, Encode(registration)).ok());
  ASSERT_EQ(told.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "the late worker never heard of node 1's loss";
  EXPECT_EQ(told.get().node, 1U);
  manager_.reset();  // before the worker's transport, which it may still reach
}

}  // namespace
}  // namespace sray::core
