#include "core/owner.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "no_store.h"
#include "sray/errors.h"
#include "sray/internal/serialization.h"

namespace sray::core {
namespace {

TaskOutcome ValueFor(const TaskSpec& spec, std::int64_t value) {
  TaskOutcome outcome = FailedOutcome(spec, OutcomeKind::kInlineValue, "");
  outcome.value = internal::Serialize(value);
  return outcome;
}

// Records what the owner frees; reads fail as in NoStore.
class FreeRecordingStore : public NoStore {
 public:
  void Free(const ObjectId& id, std::uint32_t node) override { freed.emplace_back(id, node); }
  std::vector<std::pair<ObjectId, std::uint32_t>> freed;
};

// Results are inline values, or stored ones the tests never read.
class OwnerTest : public ::testing::Test {
 protected:
  FreeRecordingStore store_;
  std::vector<TaskSpec> submitted_;
  Owner owner_{OwnerIdentity{.rank = 5, .node_id = 1}, store_,
               [this](TaskSpec spec) { submitted_.push_back(std::move(spec)); }};
};

TEST_F(OwnerTest, GetSeesAResultThatArrivesWhileTheHelperRuns) {
  const auto id = owner_.SubmitTask("f", {}, {});
  ASSERT_EQ(submitted_.size(), 1u);
  // The result lands while Get has released its lock to look for queued
  // tasks: nobody waits on the condition variable at that moment.
  bool delivered = false;
  owner_.SetHelper([&] {
    if (!delivered) {
      delivered = true;
      owner_.OnTaskOutcome(ValueFor(submitted_.front(), 42));
    }
    return false;
  });
  // Without the fix Get slept until its timeout (forever without one).
  const auto started = std::chrono::steady_clock::now();
  const auto values = owner_.Get({id}, std::chrono::seconds(60));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30))
      << "Get missed the wake-up and waited for its timeout";
  EXPECT_EQ(internal::Deserialize<std::int64_t>(values.front()->bytes(), "test"), 42);
}

TEST_F(OwnerTest, ArgumentsWaitForTheirProducerAndTravelInline) {
  const auto first = owner_.SubmitTask("f", {}, {});
  internal::TaskArgument argument;
  argument.reference = internal::NewObjectHandle(first);
  (void)owner_.SubmitTask("g", {argument}, {});
  ASSERT_EQ(submitted_.size(), 1u);  // g waits for f
  owner_.OnTaskOutcome(ValueFor(submitted_.front(), 7));
  ASSERT_EQ(submitted_.size(), 2u);
  const auto& passed = submitted_.back().arguments.front();
  EXPECT_FALSE(passed.by_reference);
  EXPECT_EQ(internal::Deserialize<std::int64_t>(passed.value, "test"), 7);
}

TEST_F(OwnerTest, AWorkerDeathIsRetriedThenReportedWithTheAttempts) {
  internal::TaskOptions options;
  options.max_retries = 1;
  const auto id = owner_.SubmitTask("f", {}, options);
  owner_.OnTaskOutcome(FailedOutcome(submitted_.back(), OutcomeKind::kWorkerDied, "died"));
  ASSERT_EQ(submitted_.size(), 2u);
  EXPECT_EQ(submitted_.back().attempt, 1);
  owner_.OnTaskOutcome(FailedOutcome(submitted_.back(), OutcomeKind::kWorkerDied, "died again"));
  EXPECT_EQ(submitted_.size(), 2u);
  EXPECT_THROW((void)owner_.Get({id}, std::chrono::milliseconds(100)), WorkerDiedError);
}

TEST_F(OwnerTest, GetTimesOutWithTheTaskName) {
  const auto id = owner_.SubmitTask("slow_function", {}, {});
  try {
    (void)owner_.Get({id}, std::chrono::milliseconds(10));
    FAIL() << "no timeout";
  } catch (const GetTimeoutError& error) {
    EXPECT_NE(std::string(error.what()).find("slow_function"), std::string::npos);
  }
}

TEST_F(OwnerTest, GetOfManyReturnsOnceEveryResultIsThere) {
  std::vector<internal::ObjectId> ids;
  ids.reserve(3);
  for (int index = 0; index < 3; ++index) ids.push_back(owner_.SubmitTask("f", {}, {}));
  ASSERT_EQ(submitted_.size(), 3u);
  auto getting = std::async(std::launch::async, [&] { return owner_.Get(ids, std::nullopt); });
  // Out of order, as results arrive from different nodes.
  owner_.OnTaskOutcome(ValueFor(submitted_[2], 30));
  owner_.OnTaskOutcome(ValueFor(submitted_[0], 10));
  EXPECT_EQ(getting.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout)
      << "Get returned before its last result";
  owner_.OnTaskOutcome(ValueFor(submitted_[1], 20));
  ASSERT_EQ(getting.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  const auto values = getting.get();
  ASSERT_EQ(values.size(), 3u);
  for (std::size_t index = 0; index < 3; ++index) {
    EXPECT_EQ(internal::Deserialize<std::int64_t>(values[index]->bytes(), "test"),
              static_cast<std::int64_t>((index + 1) * 10));
  }
}

TEST_F(OwnerTest, WaitReturnsAsSoonAsEnoughAreReady) {
  std::vector<internal::ObjectId> ids;
  ids.reserve(4);
  for (int index = 0; index < 4; ++index) ids.push_back(owner_.SubmitTask("f", {}, {}));
  owner_.OnTaskOutcome(ValueFor(submitted_[3], 3));
  auto waiting = std::async(std::launch::async, [&] { return owner_.Wait(ids, 3, std::nullopt); });
  owner_.OnTaskOutcome(ValueFor(submitted_[1], 1));
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(100)), std::future_status::timeout)
      << "Wait returned with 2 of the 3 it asked for";
  owner_.OnTaskOutcome(ValueFor(submitted_[0], 0));
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(waiting.get(), (std::vector<bool>{true, true, false, true}));
}

TEST_F(OwnerTest, AFailureAmongManyReachesGetOnceTheRestIsThere) {
  const auto first = owner_.SubmitTask("f", {}, {});
  const auto failing = owner_.SubmitTask("g", {}, {});
  auto getting = std::async(std::launch::async, [&] {
    return owner_.Get({first, failing}, std::nullopt);
  });
  owner_.OnTaskOutcome(FailedOutcome(submitted_[1], OutcomeKind::kTaskThrew, "bad input"));
  owner_.OnTaskOutcome(ValueFor(submitted_[0], 1));
  ASSERT_EQ(getting.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_THROW((void)getting.get(), TaskError);
}

// Submissions from several threads: the specs sent, under a lock. A test
// that fails with a submission still waiting ends it through FailAll, so the
// failure is reported rather than hung in a future's destructor.
// A task's result kept in the store of `node`.
TaskOutcome StoredOn(const TaskSpec& spec, std::uint32_t node) {
  TaskOutcome outcome = FailedOutcome(spec, OutcomeKind::kStoredValue, "");
  outcome.node = node;
  outcome.size = 1 << 20;
  return outcome;
}

// What a worker reports when argument `index` was not where the spec said.
TaskOutcome ArgumentLost(const TaskSpec& spec, std::uint64_t index) {
  TaskOutcome outcome = FailedOutcome(
      spec, OutcomeKind::kArgumentLost,
      "cannot read argument object " + spec.arguments.at(index).id.ToString() + " from node " +
          std::to_string(spec.arguments.at(index).node) + ": not found");
  outcome.size = index;
  outcome.node = 1;
  return outcome;
}

internal::TaskArgument ReferenceTo(const internal::ObjectId& id) {
  internal::TaskArgument argument;
  argument.reference = internal::NewObjectHandle(id);
  return argument;
}

TEST_F(OwnerTest, ALostArgumentIsRebuiltAndTheTaskRunsAgainOnceItIsReady) {
  const auto block = ReferenceTo(owner_.SubmitTask("make_block", {}, {}));
  owner_.OnTaskOutcome(StoredOn(submitted_.at(0), 2));
  const auto sum = owner_.SubmitTask("sum", {block}, {});
  ASSERT_EQ(submitted_.size(), 2u);
  EXPECT_EQ(submitted_.at(1).arguments.front().node, 2u);

  // Node 2 was lost with the block: the producer runs again, the task waits.
  owner_.OnTaskOutcome(ArgumentLost(submitted_.at(1), 0));
  ASSERT_EQ(submitted_.size(), 3u) << "the lost argument was not rebuilt";
  EXPECT_EQ(submitted_.at(2).function, "make_block");
  EXPECT_EQ(submitted_.at(2).attempt, 1);

  owner_.OnTaskOutcome(StoredOn(submitted_.at(2), 3));
  ASSERT_EQ(submitted_.size(), 4u);
  EXPECT_EQ(submitted_.at(3).function, "sum");
  EXPECT_EQ(submitted_.at(3).attempt, 1);
  EXPECT_EQ(submitted_.at(3).arguments.front().node, 3u);
  owner_.OnTaskOutcome(ValueFor(submitted_.at(3), 9));
  const auto values = owner_.Get({sum}, std::chrono::seconds(10));
  EXPECT_EQ(internal::Deserialize<std::int64_t>(values.front()->bytes(), "test"), 9);
}

TEST_F(OwnerTest, TasksThatLoseTheSameArgumentShareOneRebuild) {
  const auto block = ReferenceTo(owner_.SubmitTask("make_block", {}, {}));
  owner_.OnTaskOutcome(StoredOn(submitted_.at(0), 2));
  (void)owner_.SubmitTask("first", {block}, {});
  (void)owner_.SubmitTask("second", {block}, {});
  owner_.OnTaskOutcome(ArgumentLost(submitted_.at(1), 0));
  owner_.OnTaskOutcome(ArgumentLost(submitted_.at(2), 0));
  ASSERT_EQ(submitted_.size(), 4u);  // make_block once more, nothing else yet
  EXPECT_EQ(submitted_.at(3).function, "make_block");
  owner_.OnTaskOutcome(StoredOn(submitted_.at(3), 1));
  ASSERT_EQ(submitted_.size(), 6u);
  for (const std::size_t index : {4u, 5u}) {
    EXPECT_EQ(submitted_.at(index).arguments.front().node, 1u) << submitted_.at(index).function;
  }
}

TEST_F(OwnerTest, ALateReportOfALossNeitherRebuildsAgainNorFreesTheNewCopy) {
  const auto block = ReferenceTo(owner_.SubmitTask("make_block", {}, {}));
  owner_.OnTaskOutcome(StoredOn(submitted_.at(0), 2));
  (void)owner_.SubmitTask("first", {block}, {});
  (void)owner_.SubmitTask("second", {block}, {});
  owner_.OnTaskOutcome(ArgumentLost(submitted_.at(1), 0));
  ASSERT_EQ(submitted_.size(), 4u);
  // Rebuilt on the same node (its file had vanished, the node lived).
  owner_.OnTaskOutcome(StoredOn(submitted_.at(3), 2));
  ASSERT_EQ(submitted_.size(), 5u);
  EXPECT_EQ(submitted_.at(4).function, "first");
  const std::size_t freed_before = store_.freed.size();
  // The second task read before the rebuild: its report comes late.
  owner_.OnTaskOutcome(ArgumentLost(submitted_.at(2), 0));
  ASSERT_EQ(submitted_.size(), 6u);
  EXPECT_EQ(submitted_.at(5).function, "second") << "make_block ran a third time";
  EXPECT_EQ(submitted_.at(5).arguments.front().node, 2u);
  EXPECT_EQ(store_.freed.size(), freed_before) << "the rebuilt copy was freed";
}

TEST_F(OwnerTest, AnEarlierAttemptsOutcomeDoesNotSendATaskThatWaitsForItsArgument) {
  const auto block = ReferenceTo(owner_.SubmitTask("make_block", {}, {}));
  owner_.OnTaskOutcome(StoredOn(submitted_.at(0), 2));
  (void)owner_.SubmitTask("sum", {block}, {});
  const TaskSpec first_attempt = submitted_.at(1);
  owner_.OnTaskOutcome(ArgumentLost(first_attempt, 0));
  ASSERT_EQ(submitted_.size(), 3u);  // make_block again; sum waits
  owner_.OnTaskOutcome(FailedOutcome(first_attempt, OutcomeKind::kWorkerDied, "node 2 was lost"));
  EXPECT_EQ(submitted_.size(), 3u) << "sent before its argument was rebuilt";
  owner_.OnTaskOutcome(StoredOn(submitted_.at(2), 1));
  ASSERT_EQ(submitted_.size(), 4u);
  EXPECT_EQ(submitted_.at(3).function, "sum");
  EXPECT_EQ(submitted_.at(3).arguments.front().node, 1u);
}

TEST_F(OwnerTest, LosingSeveralArgumentsDoesNotUseUpTheTasksRetries) {
  std::vector<internal::TaskArgument> blocks;
  for (int index = 0; index < 4; ++index) {
    blocks.push_back(ReferenceTo(owner_.SubmitTask("make_block", {}, {})));
    owner_.OnTaskOutcome(StoredOn(submitted_.back(), 2));
  }
  internal::TaskOptions no_retries;
  no_retries.max_retries = 0;
  const auto sum = owner_.SubmitTask("sum", blocks, no_retries);
  // The worker reports one lost argument at a time.
  for (std::uint64_t index = 0; index < 4; ++index) {
    ASSERT_EQ(submitted_.back().function, "sum") << index;
    owner_.OnTaskOutcome(ArgumentLost(submitted_.back(), index));
    ASSERT_EQ(submitted_.back().function, "make_block") << index;
    owner_.OnTaskOutcome(StoredOn(submitted_.back(), 3));
  }
  ASSERT_EQ(submitted_.back().function, "sum");
  for (const auto& argument : submitted_.back().arguments) EXPECT_EQ(argument.node, 3u);
  owner_.OnTaskOutcome(ValueFor(submitted_.back(), 4));
  EXPECT_EQ(internal::Deserialize<std::int64_t>(
                owner_.Get({sum}, std::chrono::seconds(10)).front()->bytes(), "test"),
            4);
}

TEST_F(OwnerTest, ATaskWhoseArgumentsProducerDiedFailsAtOnceWithoutBeingSent) {
  internal::TaskOptions once;
  once.max_retries = 0;
  const auto block = ReferenceTo(owner_.SubmitTask("make_block", {}, once));
  const auto sum = owner_.SubmitTask("sum", {block}, {});
  owner_.OnTaskOutcome(FailedOutcome(submitted_.at(0), OutcomeKind::kWorkerDied, "worker died"));
  EXPECT_EQ(submitted_.size(), 1u) << "sum was sent with an argument that had failed";
  EXPECT_THROW((void)owner_.Get({sum}, std::chrono::seconds(10)), WorkerDiedError);
}

TEST_F(OwnerTest, AnArgumentThatCannotBeRebuiltFailsTheTaskWithObjectLostError) {
  internal::TaskOptions once;
  once.max_retries = 0;
  const auto block = ReferenceTo(owner_.SubmitTask("make_block", {}, once));
  owner_.OnTaskOutcome(StoredOn(submitted_.at(0), 2));
  const auto sum = owner_.SubmitTask("sum", {block}, {});
  owner_.OnTaskOutcome(ArgumentLost(submitted_.at(1), 0));
  EXPECT_EQ(submitted_.size(), 2u);
  try {
    (void)owner_.Get({sum}, std::chrono::seconds(10));
    FAIL() << "Get did not throw";
  } catch (const ObjectLostError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("from node 2"), std::string::npos) << message;
    EXPECT_NE(message.find("task make_block has no retries left"), std::string::npos) << message;
  }
}

class LimitedOwnerTest : public ::testing::Test {
 protected:
  ~LimitedOwnerTest() override { owner_.FailAll("the test ended"); }

  std::vector<TaskSpec> Submitted() {
    std::lock_guard lock(mutex_);
    return submitted_;
  }
  // Polls up to 30 s for `done`.
  template <typename Done>
  static bool Eventually(Done done) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!done()) {
      if (std::chrono::steady_clock::now() > give_up) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }

  NoStore store_;
  std::mutex mutex_;
  std::vector<TaskSpec> submitted_;
  Owner owner_{OwnerIdentity{.rank = 5, .node_id = 1}, store_, [this](TaskSpec spec) {
                 std::lock_guard lock(mutex_);
                 submitted_.push_back(std::move(spec));
               }};
};

TEST_F(LimitedOwnerTest, SubmittingBeyondTheLimitWaitsUntilTasksFinish) {
  owner_.SetMaxTasksInFlight(4);
  for (int task = 0; task < 4; ++task) (void)owner_.SubmitTask("f", {}, {});
  ASSERT_EQ(Submitted().size(), 4u);
  auto fifth = std::async(std::launch::async, [this] { return owner_.SubmitTask("f", {}, {}); });
  // Without the limit the fifth went out at once.
  EXPECT_EQ(fifth.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  EXPECT_EQ(Submitted().size(), 4u);
  // One finished: 3 in flight, an eighth (at least one) below the limit.
  owner_.OnTaskOutcome(ValueFor(Submitted().front(), 1));
  ASSERT_EQ(fifth.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "the waiting submission was not woken when a task finished";
  EXPECT_EQ(Submitted().size(), 5u);
  EXPECT_EQ(fifth.get().index, Submitted().back().return_id.index);
}

TEST_F(LimitedOwnerTest, WaitersAreWokenOncePerBatchAndFillTheRoom) {
  owner_.SetMaxTasksInFlight(16);  // resumes at 14: two finished
  for (int task = 0; task < 16; ++task) (void)owner_.SubmitTask("f", {}, {});
  auto more = std::async(std::launch::async, [this] {
    for (int task = 0; task < 2; ++task) (void)owner_.SubmitTask("g", {}, {});
  });
  ASSERT_EQ(more.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  owner_.OnTaskOutcome(ValueFor(Submitted()[0], 1));
  EXPECT_EQ(more.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout)
      << "woken before the count fell an eighth below the limit";
  owner_.OnTaskOutcome(ValueFor(Submitted()[1], 1));
  EXPECT_EQ(more.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "both submissions fit once two tasks finished";
  EXPECT_EQ(Submitted().size(), 18u);
}

TEST_F(LimitedOwnerTest, FinishedFailedAndRetriedTasksKeepTheCountRight) {
  owner_.SetMaxTasksInFlight(2);
  internal::TaskOptions retried;
  retried.max_retries = 1;
  (void)owner_.SubmitTask("f", {}, retried);
  (void)owner_.SubmitTask("g", {}, {});
  // A retry is the same task in flight, not a new one: it never waits.
  owner_.OnTaskOutcome(FailedOutcome(Submitted()[0], OutcomeKind::kWorkerDied, "died"));
  ASSERT_EQ(Submitted().size(), 3u);
  // Its second death and g's failure end both: room for two more at once.
  owner_.OnTaskOutcome(FailedOutcome(Submitted()[2], OutcomeKind::kWorkerDied, "died again"));
  owner_.OnTaskOutcome(FailedOutcome(Submitted()[1], OutcomeKind::kTaskThrew, "threw"));
  auto two_more = std::async(std::launch::async, [this] {
    (void)owner_.SubmitTask("h", {}, {});
    (void)owner_.SubmitTask("h", {}, {});
  });
  EXPECT_EQ(two_more.wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "finished tasks still counted as in flight";
}

TEST_F(LimitedOwnerTest, RaisingTheLimitLetsAWaitingSubmissionGo) {
  owner_.SetMaxTasksInFlight(1);
  (void)owner_.SubmitTask("f", {}, {});
  auto second = std::async(std::launch::async, [this] { (void)owner_.SubmitTask("f", {}, {}); });
  EXPECT_EQ(second.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  owner_.SetMaxTasksInFlight(0);
  EXPECT_EQ(second.wait_for(std::chrono::seconds(30)), std::future_status::ready);
}

TEST_F(LimitedOwnerTest, AWaitingSubmissionLendsItsCpusLikeAGet) {
  owner_.SetMaxTasksInFlight(1);
  std::mutex events_mutex;
  std::vector<bool> events;
  const auto lent = [&] {
    std::lock_guard lock(events_mutex);
    return !events.empty();
  };
  owner_.SetBlockingNotifier([&](bool blocked) {
    std::lock_guard lock(events_mutex);
    events.push_back(blocked);
  });
  (void)owner_.SubmitTask("f", {}, {});
  std::thread finisher([&] {
    if (Eventually(lent)) owner_.OnTaskOutcome(ValueFor(Submitted().front(), 1));
  });
  (void)owner_.SubmitTask("f", {}, {});
  finisher.join();
  EXPECT_EQ(Submitted().size(), 2u);
  std::lock_guard lock(events_mutex);
  EXPECT_EQ(events, (std::vector<bool>{true, false}))
      << "a task waiting to submit must lend its CPUs, or tasks waiting for CPUs could wait on it";
}

// A Get inside a waiting submission (a queued task the helper runs) must not
// take the CPUs back while the submission still waits: the node would then
// count them as used by a process that waits.
TEST_F(LimitedOwnerTest, ACallInsideAWaitNeitherLendsTwiceNorTakesTheCpusBack) {
  owner_.SetMaxTasksInFlight(1);
  std::mutex events_mutex;
  std::vector<bool> events;
  owner_.SetBlockingNotifier([&](bool blocked) {
    std::lock_guard lock(events_mutex);
    events.push_back(blocked);
  });
  const auto first = owner_.SubmitTask("f", {}, {});  // fills the room
  std::atomic<bool> queued{false};
  std::atomic<bool> inner_waits{false};
  owner_.SetHelper([&] {
    if (!queued.exchange(false)) return false;
    // The queued task: a Get of f's result, which waits as well.
    inner_waits = true;
    (void)owner_.Get({first}, std::chrono::seconds(30));
    return true;
  });
  std::thread outside([&] {
    // Once the submission waits (its CPUs lent), a task is queued here;
    // f finishes while that task's Get waits inside the submission's wait.
    if (!Eventually([&] {
          std::lock_guard lock(events_mutex);
          return !events.empty();
        })) {
      return;
    }
    queued = true;
    owner_.WakeWaiters();
    if (!Eventually([&] { return inner_waits.load(); })) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    owner_.OnTaskOutcome(ValueFor(Submitted().front(), 1));
  });
  (void)owner_.SubmitTask("g", {}, {});
  outside.join();
  std::lock_guard lock(events_mutex);
  // Before: {true, true, false, false}, the CPUs taken back while the
  // submission still waited.
  EXPECT_EQ(events, (std::vector<bool>{true, false}));
}

TEST_F(LimitedOwnerTest, NoLimitByDefault) {
  for (int task = 0; task < 1000; ++task) (void)owner_.SubmitTask("f", {}, {});
  EXPECT_EQ(Submitted().size(), 1000u);
}

// A stored object its node no longer has: the error names the store's own
// reason, so that a loss seen once (a chaos run) says which way it was lost.
TEST(OwnerLostObject, TheErrorCarriesTheStoresReason) {
  class LosingStore final : public NoStore {
   public:
    Result<std::string> MakeLocal(const ObjectId& id, std::uint32_t, std::uint64_t) override {
      return Status::NotFound("object " + id.ToString() + " is not in the store of node 2");
    }
  } store;
  std::vector<TaskSpec> submitted;
  Owner owner{OwnerIdentity{.rank = 5, .node_id = 1}, store,
              [&submitted](TaskSpec spec) { submitted.push_back(std::move(spec)); }};
  internal::TaskOptions once;
  once.max_retries = 0;
  const auto id = owner.SubmitTask("make_block", {}, once);
  owner.OnTaskOutcome(StoredOn(submitted.at(0), 2));
  try {
    (void)owner.Get({id}, std::chrono::seconds(5));
    FAIL() << "Get did not throw";
  } catch (const ObjectLostError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("node 2 no longer has it (object " + id.ToString() +
                           " is not in the store of node 2)"),
              std::string::npos)
        << message;
  }
}

}  // namespace
}  // namespace sray::core
