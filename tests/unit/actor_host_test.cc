// The actor's side of Kill and restarts, between two real transports in one
// process: ActorHost refuses to retire while a call runs, retires when none
// does (Serve returns, the last counts go out), drops calls meant for an
// earlier incarnation, which a restart in the same process may receive, and
// answers with a stored result only once the store has sealed it.

#include "core/actor_host.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <sray/api.h>

#include "core/protocol.h"
#include "no_store.h"
#include "test_files.h"
#include "transport/transport.h"

namespace actor_host_test {

// Blocks in Hold until the test lets it go.
class Gate {
 public:
  static Gate* Create() { return new Gate(); }
  int Hold(int value) {
    Release().wait_until_open();
    return value;
  }
  int Echo(int value) { return value; }
  int Nap(int microseconds) {
    std::this_thread::sleep_for(std::chrono::microseconds(microseconds));
    return microseconds;
  }
  // Above the inline limit: the result goes to the store.
  std::string Blob(int size) { return std::string(static_cast<std::size_t>(size), 'b'); }

  struct Latch {
    std::mutex mutex;
    std::condition_variable changed;
    bool entered = false;
    bool open = false;
    void wait_until_open() {
      std::unique_lock lock(mutex);
      entered = true;
      changed.notify_all();
      changed.wait(lock, [&] { return open; });
    }
  };
  static Latch& Release() {
    static Latch latch;
    return latch;
  }
};

}  // namespace actor_host_test

SRAY_REMOTE(actor_host_test::Gate::Create, &actor_host_test::Gate::Hold,
            &actor_host_test::Gate::Echo, &actor_host_test::Gate::Blob,
            &actor_host_test::Gate::Nap);

namespace sray::core {
namespace {

using actor_host_test::Gate;
using transport::Bytes;
using transport::Transport;

constexpr std::uint64_t kHostedActor = 7;
constexpr std::int32_t kIncarnation = 1;
constexpr std::uint32_t kHostRank = 1;
constexpr std::uint32_t kHostCallerRank = 2;

// Files in a scratch directory, and how each object was sealed.
class SealRecordingStore final : public NoStore {
 public:
  Result<std::string> Create(const ObjectId& id, std::uint64_t, std::int32_t) override {
    return (directory_.path() / id.ToString()).string();
  }
  Status Seal(const ObjectId&, std::uint64_t, std::int32_t, SealWait wait) override {
    std::lock_guard lock(mutex_);
    seals_.push_back(wait);
    return Status::Ok();
  }
  std::vector<SealWait> seals() {
    std::lock_guard lock(mutex_);
    return seals_;
  }

 private:
  testing::ScratchDirectory directory_;
  std::mutex mutex_;
  std::vector<SealWait> seals_;
};

// The caller's side: answers and call counts that reach it.
struct Received {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<TaskOutcome> answers;
  std::vector<ActorCallTally> tallies;

  template <typename Predicate>
  bool WaitFor(Predicate done, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, limit, [&] { return done(*this); });
  }
};

class ActorHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    host_transport_ = Make(kHostRank);
    caller_ = Make(kHostCallerRank);
    received_ = std::make_shared<Received>();
    caller_->RegisterOneWayHandler(kActorCallDone, [received = received_](std::uint32_t, auto payload) {
      auto outcome = Decode<TaskOutcome>(payload, "answer");
      std::lock_guard lock(received->mutex);
      if (outcome.ok()) received->answers.push_back(*outcome);
      received->changed.notify_all();
    });
    caller_->RegisterOneWayHandler(kActorCallTally, [received = received_](std::uint32_t, auto payload) {
      auto tally = Decode<ActorCallTally>(payload, "tally");
      std::lock_guard lock(received->mutex);
      if (tally.ok()) received->tallies.push_back(*tally);
      received->changed.notify_all();
    });
    internal::ActorInstance instance{std::shared_ptr<void>(new Gate(), [](void* gate) {
                                       delete static_cast<Gate*>(gate);
                                     }),
                                     &typeid(Gate)};
    // The caller's rank stands in for the node manager, which gets the counts.
    host_ = std::make_unique<ActorHost>(
        std::move(instance), kHostedActor, kIncarnation, 1, store_, 0, *host_transport_,
        kHostCallerRank, [](std::uint32_t, const std::string&) {},
        [](std::uint64_t) { return false; });
    host_transport_->RegisterOneWayHandler(kActorCall, [this](std::uint32_t source, auto payload) {
      host_->Accept(source, Bytes(payload.begin(), payload.end()));
    });
    serving_ = std::thread([this] {
      host_->Serve();
      served_.store(true);
    });
  }

  void TearDown() override {
    {
      std::lock_guard lock(Gate::Release().mutex);
      Gate::Release().open = true;
    }
    Gate::Release().changed.notify_all();
    for (int attempt = 0; attempt < 2000 && !host_->Retire(); ++attempt) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    serving_.join();
  }

  std::unique_ptr<Transport> Make(std::uint32_t rank) {
    transport::TransportOptions options;
    options.rank = rank;
    options.token = transport::JobToken{};
    options.resolve_address = [this](std::uint32_t peer) -> Result<Bytes> {
      std::lock_guard lock(mutex_);
      auto found = addresses_.find(peer);
      if (found == addresses_.end()) return Status::NotFound("no address");
      return found->second;
    };
    auto created = Transport::Create(std::move(options));
    EXPECT_TRUE(created.ok()) << created.status().message();
    auto address = (*created)->LocalAddress(false);
    std::lock_guard lock(mutex_);
    addresses_[rank] = *address;
    return std::move(created).value();
  }

  void Call(std::uint64_t task, const std::string& method, int value, std::int32_t incarnation,
            std::uint64_t sequence) {
    TaskSpec spec;
    spec.task_id = task;
    spec.function = method;
    spec.kind = TaskKind::kActorMethod;
    spec.actor_id = kHostedActor;
    spec.incarnation = incarnation;
    spec.sequence = sequence;
    spec.owner_rank = kHostCallerRank;
    spec.arguments.push_back(ArgumentSpec{.by_reference = false,
                                          .value = internal::Serialize(value),
                                          .id = {},
                                          .node = 0,
                                          .size = 0});
    caller_->Post(kHostRank, kActorCall, Encode(spec));
  }

  std::mutex mutex_;
  std::map<std::uint32_t, Bytes> addresses_;
  SealRecordingStore store_;
  std::unique_ptr<Transport> host_transport_;
  std::unique_ptr<Transport> caller_;
  std::shared_ptr<Received> received_;
  std::unique_ptr<ActorHost> host_;
  std::thread serving_;
  std::atomic<bool> served_{false};
};

TEST_F(ActorHostTest, RetireIsRefusedWhileACallRunsAndEndsServingWhenNoneDoes) {
  Call(1, "actor_host_test::Gate::Hold", 5, kIncarnation, 0);
  {
    std::unique_lock lock(Gate::Release().mutex);
    ASSERT_TRUE(Gate::Release().changed.wait_for(lock, std::chrono::seconds(20),
                                                 [] { return Gate::Release().entered; }));
  }
  EXPECT_FALSE(host_->Retire()) << "a call runs: the worker must end its process instead";
  {
    std::lock_guard lock(Gate::Release().mutex);
    Gate::Release().open = true;
  }
  Gate::Release().changed.notify_all();
  ASSERT_TRUE(received_->WaitFor([](Received& got) { return got.answers.size() == 1; }));
  EXPECT_EQ(received_->answers[0].task_id, 1u);
  // The call stopped counting as running before its answer left.
  EXPECT_TRUE(host_->Retire());
  for (int attempt = 0; attempt < 2000 && !served_.load(); ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(served_.load()) << "Serve returned after Retire";
  ASSERT_TRUE(received_->WaitFor([](Received& got) {
    for (const auto& tally : got.tallies) {
      for (const auto& method : tally.methods) {
        if (method.finished == 1 && method.running == 0) return true;
      }
    }
    return false;
  })) << "the last counts went out before Serve returned";
}

// An answer is sent by the thread that ran the call when the progress
// thread sleeps, and calls that arrive meanwhile are accepted on the
// progress thread, which holds the worker's lock while Accept waits for the
// host's. Sent while the host's lock was held, the two waited for each other
// for good (a microbenchmark of async actor calls hung so). Calls come with
// pauses, and each call sleeps, so that the progress thread falls asleep
// before answers and is woken by calls arriving as they are sent.
TEST_F(ActorHostTest, CallsArrivingWhileAnswersAreSentAreAllAnswered) {
  constexpr int kCalls = 400;
  std::mt19937 random(20261206);
  std::uniform_int_distribution<int> pause_microseconds(0, 400);
  for (int index = 0; index < kCalls; ++index) {
    Call(static_cast<std::uint64_t>(index + 1), "actor_host_test::Gate::Nap", 150, kIncarnation,
         static_cast<std::uint64_t>(index));
    std::this_thread::sleep_for(std::chrono::microseconds(pause_microseconds(random)));
  }
  EXPECT_TRUE(received_->WaitFor([](Received& got) { return got.answers.size() == kCalls; }))
      << "some calls were never answered";
}

TEST_F(ActorHostTest, ACallForAnEarlierIncarnationIsDroppedNotRun) {
  Call(1, "actor_host_test::Gate::Echo", 1, kIncarnation - 1, 0);  // sent to the one before
  Call(2, "actor_host_test::Gate::Echo", 2, kIncarnation, 0);
  ASSERT_TRUE(received_->WaitFor([](Received& got) { return !got.answers.empty(); }));
  EXPECT_FALSE(received_->WaitFor([](Received& got) { return got.answers.size() > 1; },
                                  std::chrono::milliseconds(300)));
  ASSERT_EQ(received_->answers.size(), 1u);
  EXPECT_EQ(received_->answers[0].task_id, 2u) << "only the current incarnation's call ran";
}

// The answer goes straight to the caller, not through the node manager:
// with the seal only posted to the manager, the caller's pull could reach
// the store before the seal did and find the object still being created
// (a chaos run lost an actor's result that way).
TEST_F(ActorHostTest, AStoredResultIsSealedBeforeItsCallerHearsOfIt) {
  Call(1, "actor_host_test::Gate::Blob", static_cast<int>(kInlineObjectLimit) + 1, kIncarnation, 0);
  ASSERT_TRUE(received_->WaitFor([](Received& got) { return !got.answers.empty(); }));
  ASSERT_EQ(received_->answers[0].kind, static_cast<std::uint8_t>(OutcomeKind::kStoredValue))
      << received_->answers[0].error_message;
  EXPECT_EQ(store_.seals(), std::vector<SealWait>{SealWait::kUntilSealed});
}

}  // namespace
}  // namespace sray::core
