// The caller's side of actors over a real transport, with a head that answers
// in the calling thread as the driver's own head does: which entries the
// client keeps once an actor is dead (a program that makes and kills actors
// all day must not grow), and which results of lost or late calls it has
// freed in the store of the actor's node.

#include "core/actor_client.h"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/owner.h"
#include "core/process_runtime.h"
#include "no_store.h"
#include "sray/errors.h"
#include "sray/internal/serialization.h"
#include "transport/transport.h"
#include "transports_by_rank.h"

namespace sray::core {
namespace {

constexpr std::uint32_t kCallerRank = 1;
constexpr std::uint32_t kActorRank = 2;
constexpr internal::ActorId kActor = 7;
constexpr std::uint32_t kActorNode = 1;

// Inline values only, and a record of what the client asked to discard.
class OrphanRecordingStore final : public NoStore {
 public:
  void DiscardOrphan(const OrphanedResult& orphan) override {
    std::lock_guard lock(mutex_);
    discarded_.push_back(orphan);
  }
  std::vector<OrphanedResult> Discarded() {
    std::lock_guard lock(mutex_);
    return discarded_;
  }

 private:
  std::mutex mutex_;
  std::vector<OrphanedResult> discarded_;
};

// Answers like the driver's head (MakeLocalHead): a kill tells the waiting
// caller of the death before KillActor returns.
class AnsweringHead final : public HeadService {
 public:
  explicit AnsweringHead(std::string actor_address) : actor_address_(std::move(actor_address)) {}

  Result<ActorInfo> CreateActor(const ActorCreation& creation) override {
    ActorInfo info;
    info.id = kActor;
    info.factory = creation.factory;
    info.state =
        static_cast<std::uint8_t>(dead_at_creation_ ? ActorState::kDead : ActorState::kAlive);
    if (dead_at_creation_) info.cause = "its placement group was removed";
    info.node = kActorNode;
    info.worker_rank = kActorRank;
    info.worker_address = actor_address_;
    info.hostname = "another-host";
    return info;
  }
  Result<ActorInfo> LookupActor(const std::string&) override {
    return Status::NotFound("no names here");
  }
  void WaitForChange(const ActorWait&, std::function<void(Result<ActorInfo>)> done) override {
    waiting_ = std::move(done);
  }
  Status KillActor(const ActorKill& kill) override {
    ++kills_;
    ActorInfo dead;
    dead.id = kill.id;
    dead.factory = "Counter::Create";
    dead.state = static_cast<std::uint8_t>(ActorState::kDead);
    dead.cause = "was ended by Kill";
    Answer(std::move(dead));
    return Status::Ok();
  }
  // Tells the waiting caller, if any, of a change.
  void Answer(ActorInfo info) {
    if (!waiting_) return;
    auto done = std::move(waiting_);
    waiting_ = nullptr;
    done(std::move(info));
  }
  static ActorInfo Restarted(std::uint32_t worker_rank) {
    ActorInfo info;
    info.id = kActor;
    info.factory = "Counter::Create";
    info.state = static_cast<std::uint8_t>(ActorState::kRestarting);
    info.incarnation = 1;
    info.node = kActorNode;
    info.worker_rank = worker_rank;
    return info;
  }
  Result<PlacementGroupInfo> CreatePlacementGroup(const PlacementGroupCreation&) override {
    return Status::Internal("no groups in this test");
  }
  Result<PlacementGroupInfo> WaitPlacementGroup(std::uint64_t, internal::Timeout) override {
    return Status::Internal("no groups in this test");
  }
  Status RemovePlacementGroup(std::uint64_t) override {
    return Status::Internal("no groups in this test");
  }

  int kills_ = 0;
  bool dead_at_creation_ = false;  // answer creations with a dead actor

 private:
  std::string actor_address_;
  std::function<void(Result<ActorInfo>)> waiting_;
};

class ActorClientTest : public ::testing::Test {
 protected:
  ActorClientTest() {
    actor_transport_ = MakeTransport(kActorRank);
    caller_transport_ = MakeTransport(kCallerRank);
    head_ = std::make_unique<AnsweringHead>(
        std::string(transport::TextOf(transports_.AddressOf(kActorRank))));
    client_ = std::make_unique<ActorClient>(owner_, *head_, *caller_transport_,
                                            /*address_book=*/nullptr, "this-host");
    owner_.SetActorCalls(client_.get());
  }
  ~ActorClientTest() override {
    client_->Stop();
    owner_.SetActorCalls(nullptr);
  }

  std::unique_ptr<transport::Transport> MakeTransport(std::uint32_t rank) {
    return transports_.Make(rank);
  }

  // The caller asked to free `result` where the call was sent: the actor's
  // node, the process and incarnation that ran it.
  void ExpectOnlyDiscardOf(const ObjectId& result) {
    const auto discarded = store_.Discarded();
    ASSERT_EQ(discarded.size(), 1u);
    EXPECT_EQ(discarded[0].id, result);
    EXPECT_EQ(discarded[0].node, kActorNode);
    EXPECT_EQ(discarded[0].made_by, kActorRank);
    EXPECT_EQ(discarded[0].actor_id, kActor);
    EXPECT_EQ(discarded[0].incarnation, 0) << "the incarnation the call was sent to";
  }

  // Dropped handles reach this test's owner while it lives.
  struct RuntimeForTheTest {
    explicit RuntimeForTheTest(Owner& owner) { SetProcessRuntime(&owner); }
    ~RuntimeForTheTest() { SetProcessRuntime(nullptr); }
    RuntimeForTheTest(const RuntimeForTheTest&) = delete;
    RuntimeForTheTest& operator=(const RuntimeForTheTest&) = delete;
  };

  // Constructor arguments whose value holds the only reference to an object
  // of owner_ (the program dropped its own).
  std::vector<internal::TaskArgument> ArgumentsHoldingAnObject() {
    const ObjectId inner = owner_.AddInlineObject(internal::Serialize(std::int64_t{5}), {});
    internal::TaskArgument argument;
    argument.value = "packed value holding a reference";
    argument.contained.push_back(internal::NewObjectHandle(inner));
    std::vector<internal::TaskArgument> arguments;
    arguments.push_back(std::move(argument));
    return arguments;
  }

  TransportsByRank transports_;  // outlives the transports below
  OrphanRecordingStore store_;
  Owner owner_{OwnerIdentity{.rank = kCallerRank, .node_id = 0}, store_, [](TaskSpec) {}};
  std::unique_ptr<transport::Transport> actor_transport_;
  std::unique_ptr<transport::Transport> caller_transport_;
  std::unique_ptr<AnsweringHead> head_;
  std::unique_ptr<ActorClient> client_;
};

TEST_F(ActorClientTest, AnActorKilledWithoutCallsLeavesNoEntry) {
  const auto actor = owner_.CreateActor("Counter::Create", {}, {});
  ASSERT_EQ(client_->KnownActors(), 1u);
  owner_.KillActor(actor, /*no_restart=*/true);
  EXPECT_EQ(head_->kills_, 1);
  EXPECT_EQ(client_->KnownActors(), 0u) << "a dead actor with nothing to answer kept its entry";
}

// The references in a constructor's arguments are held until the actor is
// dead; an actor that was never called never asked the head about its fate,
// so they stayed for the whole job when its process died.
TEST_F(ActorClientTest, AnActorNeverCalledReleasesItsConstructorsReferencesWhenItDies) {
  const RuntimeForTheTest runtime(owner_);
  const auto actor = owner_.CreateActor("Counter::Create", ArgumentsHoldingAnObject(), {});
  ASSERT_EQ(owner_.counts().owned, 1U) << "the constructor's reference was not kept";
  ActorInfo dead;
  dead.id = actor;
  dead.factory = "Counter::Create";
  dead.state = static_cast<std::uint8_t>(ActorState::kDead);
  dead.cause = "its process died (killed by signal 9) and it has no restarts left";
  head_->Answer(std::move(dead));
  EXPECT_EQ(owner_.counts().owned, 0U) << "the dead actor's constructor kept its reference";
  EXPECT_EQ(client_->KnownActors(), 0U);
}

// An actor the head answers dead at once: its constructor's references go,
// and so does the entry the client made for it.
TEST_F(ActorClientTest, AnActorDeadAtCreationKeepsNeitherItsReferencesNorAnEntry) {
  const RuntimeForTheTest runtime(owner_);
  head_->dead_at_creation_ = true;
  (void)owner_.CreateActor("Counter::Create", ArgumentsHoldingAnObject(), {});
  EXPECT_EQ(owner_.counts().owned, 0U);
  EXPECT_EQ(client_->KnownActors(), 0U) << "a dead actor's entry stayed";
  (void)owner_.CreateActor("Counter::Create", {}, {});
  EXPECT_EQ(client_->KnownActors(), 0U) << "a dead actor's entry stayed (no references)";
}

TEST_F(ActorClientTest, AKillTheHeadAnswersAtOnceLeavesNoEntryAndFailsTheCallInFlight) {
  const auto actor = owner_.CreateActor("Counter::Create", {}, {});
  // The call goes out, and with it the question to the head that stays open
  // while the actor lives; nobody answers the call itself.
  const auto result = owner_.SubmitActorTask(actor, 0, "Counter::Add", {}, "Counter.Add");
  // The head answers the open question inside KillActor: the call fails and
  // the entry goes before Kill looks at it again (it used to make a new one).
  owner_.KillActor(actor, /*no_restart=*/true);
  EXPECT_EQ(client_->KnownActors(), 0u)
      << "Kill brought back the entry of an actor already forgotten";
  EXPECT_THROW((void)owner_.Get({result}, std::chrono::seconds(10)), ActorDiedError);
  // Its process may have stored the result before it died.
  ExpectOnlyDiscardOf(result);
}

TEST_F(ActorClientTest, ACallLostToARestartAsksForItsResultToBeFreedWhereItWasSent) {
  const auto actor = owner_.CreateActor("Counter::Create", {}, {});
  const auto result = owner_.SubmitActorTask(actor, 0, "Counter::Add", {}, "Counter.Add");
  // The actor's process died and the actor restarts: the call is lost (no
  // retries asked for), and its process may have stored the result. The
  // node manager frees only that attempt's entry.
  head_->Answer(AnsweringHead::Restarted(kActorRank + 1));
  EXPECT_THROW((void)owner_.Get({result}, std::chrono::seconds(10)), ActorDiedError);
  ExpectOnlyDiscardOf(result);
}

TEST_F(ActorClientTest, ALateAnswersStoredResultIsDiscarded) {
  const auto actor = owner_.CreateActor("Counter::Create", {}, {});
  const auto result = owner_.SubmitActorTask(actor, 0, "Counter::Add", {}, "Counter.Add");
  owner_.KillActor(actor, /*no_restart=*/true);
  ASSERT_EQ(store_.Discarded().size(), 1u);
  // The answer the actor's process sent before it was killed, with its
  // result in the node's store, arrives after the call was given up.
  TaskOutcome late;
  late.task_id = 1;
  late.return_id = result;
  late.actor_id = actor;
  late.kind = static_cast<std::uint8_t>(OutcomeKind::kStoredValue);
  late.incarnation = 0;
  late.node = kActorNode;
  late.size = 200'000;
  actor_transport_->Post(kCallerRank, kActorCallDone, Encode(late));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (store_.Discarded().size() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const auto discarded = store_.Discarded();
  ASSERT_EQ(discarded.size(), 2u) << "the late answer's stored result was not freed";
  EXPECT_EQ(discarded[1].id, result);
  EXPECT_EQ(discarded[1].node, kActorNode);
  EXPECT_EQ(discarded[1].made_by, kActorRank);
}

}  // namespace
}  // namespace sray::core
