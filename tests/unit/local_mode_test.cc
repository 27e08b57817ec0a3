// Local mode: the public API, unchanged, in one process without a launcher.
// Its own program: sray::Init starts local mode once, in main, before the
// tests run (SRAY_LOCAL_MODE is not set: InitOptions::local_mode does it).

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <sray/api.h>

// Packs as msgpack does a string of 4 GiB or more: it throws.
struct TooLargeToEncode {};
namespace msgpack {
MSGPACK_API_VERSION_NAMESPACE(MSGPACK_DEFAULT_API_NS) {
  namespace adaptor {
  template <>
  struct pack<TooLargeToEncode> {
    template <typename Stream>
    packer<Stream>& operator()(packer<Stream>& /*packer*/,
                               const TooLargeToEncode& /*value*/) const {
      throw container_size_overflow("str size overflow");
    }
  };
  }  // namespace adaptor
}
}  // namespace msgpack

namespace {

std::int64_t Square(std::int64_t value) {
  return value * value;
}

std::int64_t Add(std::int64_t left, std::int64_t right) {
  return left + right;
}

std::int64_t Fails(std::int64_t value) {
  throw std::invalid_argument("no good: " + std::to_string(value));
}

// A task that waits for tasks of its own: must not starve the threads.
std::int64_t SumOfSquares(std::int64_t count) {
  std::vector<sray::ObjectRef<std::int64_t>> parts;
  parts.reserve(static_cast<std::size_t>(count));
  for (std::int64_t index = 0; index < count; ++index) {
    parts.push_back(sray::Task(Square).Remote(index));
  }
  const auto values = sray::Get(parts);
  return std::accumulate(values.begin(), values.end(), std::int64_t{0});
}

std::int64_t Sleep(std::int64_t milliseconds) {
  std::this_thread::sleep_for(std::chrono::milliseconds(milliseconds));
  return milliseconds;
}

std::uint64_t Checksum(std::vector<std::uint64_t> values) {
  return std::accumulate(values.begin(), values.end(), std::uint64_t{0});
}

// Shutdown from a task cannot end local mode (it would join this thread):
// refused, and the program goes on.
bool ShutdownFromTask() {
  sray::Shutdown();
  return sray::IsInitialized();
}

std::uint32_t NodeOfTask() {
  return sray::CurrentNode().node_id;
}

// ObjectRefs inside values: they arrive as references, not values.
std::int64_t SumOfRefs(std::vector<sray::ObjectRef<std::int64_t>> refs) {
  std::int64_t sum = 0;
  for (const auto value : sray::Get(refs)) sum += value;
  return sum;
}

std::vector<sray::ObjectRef<std::int64_t>> PutEach(std::int64_t count) {
  std::vector<sray::ObjectRef<std::int64_t>> refs;
  for (std::int64_t value = 0; value < count; ++value) refs.push_back(sray::Put(value * 10));
  return refs;
}

class Counter {
 public:
  explicit Counter(std::int64_t start) : value_(start) {}
  static Counter* Create(std::int64_t start) { return new Counter(start); }
  static Counter* Broken(std::int64_t) { throw std::runtime_error("cannot build it"); }
  std::int64_t Add(std::int64_t amount) {
    value_ += amount;
    return value_;
  }
  [[nodiscard]] std::int64_t Value() const { return value_; }

 private:
  std::int64_t value_;
};

}  // namespace

SRAY_REMOTE(Square, Add, Fails, SumOfSquares, Sleep, Checksum, NodeOfTask, ShutdownFromTask);
SRAY_REMOTE(SumOfRefs, PutEach);
SRAY_REMOTE(Counter::Create, Counter::Broken, &Counter::Add, &Counter::Value);

namespace {

TEST(LocalMode, TasksRunAndTheirResultsCanBeCombined) {
  auto nine = sray::Task(Square).Remote(3);
  auto sum = sray::Task(Add).Remote(nine, 1);  // an ObjectRef as an argument
  EXPECT_EQ(sray::Get(sum), 10);
  EXPECT_EQ(sray::Get(sray::Task(SumOfSquares).Remote(50)), 40425);
}

TEST(LocalMode, ABigObjectStaysInMemoryAndRoundTrips) {
  std::vector<std::uint64_t> big(1 << 20);  // 8 MiB: a store object in a job
  std::iota(big.begin(), big.end(), std::uint64_t{1});
  const auto ref = sray::Put(big);
  EXPECT_EQ(sray::Get(ref), big);
  EXPECT_EQ(sray::Get(sray::Task(Checksum).Remote(ref)),
            (std::uint64_t{1} << 20) * ((std::uint64_t{1} << 20) + 1) / 2);
  const auto usage = sray::StoreUsage();
  ASSERT_EQ(usage.size(), 1u);
  EXPECT_EQ(usage[0].in_memory, 0u);
}

TEST(LocalMode, ATaskThatThrowsRaisesTaskErrorWithTheCause) {
  try {
    (void)sray::Get(sray::Task(Fails).Remote(7));
    FAIL() << "no TaskError";
  } catch (const sray::TaskError& error) {
    EXPECT_NE(std::string(error.what()).find("no good: 7"), std::string::npos) << error.what();
  }
}

TEST(LocalMode, GetAndWaitHonourTheirTimeouts) {
  auto slow = sray::Task(Sleep).Remote(3000);
  EXPECT_THROW((void)sray::Get(slow, std::chrono::milliseconds(50)), sray::GetTimeoutError);
  const auto waited = sray::Wait(std::vector{slow}, 1, std::chrono::milliseconds(50));
  EXPECT_EQ(waited.ready.size(), 0u);
  EXPECT_EQ(waited.unready.size(), 1u);
  EXPECT_EQ(sray::Get(slow), 3000);
}

// As in Ray: `ready` holds at most num_objects refs (the first ready ones in
// the order given), and every other ref is in `unready`. Before, every ready
// ref came back in `ready`, and the usual loop (take ready[0], go on with
// unready) lost the results of the others.
TEST(LocalMode, WaitGivesAtMostTheAskedNumberAsReadyAndTheRestAsUnready) {
  std::vector<sray::ObjectRef<int>> refs;
  for (int value = 0; value < 4; ++value) refs.push_back(sray::Put(value));
  const auto one = sray::Wait(refs, 1);
  ASSERT_EQ(one.ready.size(), 1u);
  EXPECT_EQ(one.ready[0].id(), refs[0].id());
  ASSERT_EQ(one.unready.size(), 3u);
  for (std::size_t index = 0; index < 3; ++index)
    EXPECT_EQ(one.unready[index].id(), refs[index + 1].id());
  const auto three = sray::Wait(refs, 3, std::chrono::milliseconds(100));
  EXPECT_EQ(three.ready.size(), 3u);
  EXPECT_EQ(three.unready.size(), 1u);
  // The loop a Ray user writes sees every result once.
  std::vector<int> seen;
  for (auto pending = refs; !pending.empty();) {
    auto waited = sray::Wait(pending, 1);
    ASSERT_EQ(waited.ready.size(), 1u);
    seen.push_back(sray::Get(waited.ready[0]));
    pending = std::move(waited.unready);
  }
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2, 3}));
}

// "As long as it takes": milliseconds::max() added to now overflowed the
// clock, and Get threw GetTimeoutError at once, Wait returned nothing ready.
TEST(LocalMode, TheLongestTimeoutWaitsInsteadOfExpiringAtOnce) {
  auto slow = sray::Task(Sleep).Remote(200);
  const auto waited = sray::Wait(std::vector{slow}, 1, std::chrono::milliseconds::max());
  EXPECT_EQ(waited.ready.size(), 1u);
  EXPECT_EQ(sray::Get(sray::Task(Sleep).Remote(200), std::chrono::milliseconds::max()), 200);
  sray::PlacementGroupCreationOptions options;
  options.bundles = {{{"CPU", 1}}};
  auto group = sray::CreatePlacementGroup(options);
  EXPECT_TRUE(group.Wait(std::chrono::milliseconds::max()));
  sray::RemovePlacementGroup(group);
}

// Ray's "retry for ever" (-1) meant no retry at all here, without a word.
TEST(LocalMode, ANegativeRetryCountIsRefusedNamingTheFix) {
  try {
    (void)sray::Task(Sleep).SetMaxRetries(-1);
    FAIL() << "SetMaxRetries(-1) accepted";
  } catch (const sray::ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("must be 0 or more"), std::string::npos)
        << error.what();
  }
  EXPECT_EQ(sray::Get(sray::Task(Sleep).SetMaxRetries(0).Remote(1)), 1);
}

// A value msgpack cannot encode (a string of 4 GiB or more; this type
// throws as msgpack does for one, without the memory) is a SerializationError
// naming the fix; before, msgpack's own std::runtime_error escaped Put.
TEST(LocalMode, AValueTooLargeToEncodeIsASerializationErrorNamingTheFix) {
  try {
    (void)sray::Put(TooLargeToEncode{});
    FAIL() << "Put accepted it";
  } catch (const sray::SerializationError& error) {
    EXPECT_NE(std::string(error.what()).find("split it into smaller pieces"), std::string::npos)
        << error.what();
  }
}

TEST(LocalMode, ActorsKeepStateAndRunCallsInOrder) {
  auto counter = sray::Actor(Counter::Create).Remote(10);
  std::vector<sray::ObjectRef<std::int64_t>> sums;
  sums.reserve(100);
  for (int call = 0; call < 100; ++call) sums.push_back(counter.Task(&Counter::Add).Remote(1));
  const auto values = sray::Get(sums);
  for (std::size_t call = 0; call < values.size(); ++call) {
    EXPECT_EQ(values[call], 11 + static_cast<std::int64_t>(call));
  }
  EXPECT_EQ(sray::Get(counter.Task(&Counter::Value).Remote()), 110);
}

TEST(LocalMode, ACallWhoseArgumentFailedDoesNotHoldBackTheCallsAfterIt) {
  auto counter = sray::Actor(Counter::Create).Remote(1);
  auto failed = sray::Task(Fails).Remote(3);
  auto doomed = counter.Task(&Counter::Add).Remote(failed);
  EXPECT_THROW((void)sray::Get(doomed), sray::TaskError);
  // Before the fix this waited forever: the failed call kept its place in line.
  EXPECT_EQ(sray::Get(counter.Task(&Counter::Value).Remote(), std::chrono::seconds(20)), 1);
}

TEST(LocalMode, NamedActorsAreFoundAndNamesAreUnique) {
  auto named = sray::Actor(Counter::Create).SetName("tally").Remote(1);
  (void)sray::Get(named.Task(&Counter::Add).Remote(1));
  auto found = sray::GetActor<Counter>("tally");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(sray::Get(found->Task(&Counter::Value).Remote()), 2);
  EXPECT_THROW((void)sray::Actor(Counter::Create).SetName("tally").Remote(0), sray::ConfigError);
  EXPECT_FALSE(sray::GetActor<Counter>("nobody").has_value());
}

TEST(LocalMode, AKilledActorsCallsFailWithActorDiedError) {
  auto counter = sray::Actor(Counter::Create).Remote(0);
  EXPECT_EQ(sray::Get(counter.Task(&Counter::Add).Remote(5)), 5);
  counter.Kill();
  EXPECT_THROW((void)sray::Get(counter.Task(&Counter::Value).Remote()), sray::ActorDiedError);
}

TEST(LocalMode, KillWithRestartsLeftRebuildsTheActorAndItsCallsGoOn) {
  auto counter = sray::Actor(Counter::Create).SetMaxRestarts(1).Remote(7);
  EXPECT_EQ(sray::Get(counter.Task(&Counter::Add).Remote(3)), 10);
  counter.Kill(/*no_restart=*/false);
  // A new instance from the constructor's arguments: the state starts over.
  EXPECT_EQ(sray::Get(counter.Task(&Counter::Value).Remote(), std::chrono::seconds(20)), 7);
  counter.Kill(/*no_restart=*/false);  // no restart left: dead for good
  EXPECT_THROW((void)sray::Get(counter.Task(&Counter::Value).Remote()), sray::ActorDiedError);
}

TEST(LocalMode, ShutdownFromATaskIsRefusedAndTheProgramGoesOn) {
  EXPECT_TRUE(sray::Get(sray::Task(ShutdownFromTask).Remote(), std::chrono::seconds(20)));
  EXPECT_EQ(sray::Get(sray::Task(Square).Remote(4)), 16);
}

TEST(LocalMode, AConstructorThatThrowsMakesTheActorDeadWithTheCause) {
  auto broken = sray::Actor(Counter::Broken).Remote(0);
  try {
    (void)sray::Get(broken.Task(&Counter::Value).Remote());
    FAIL() << "no ActorDiedError";
  } catch (const sray::ActorDiedError& error) {
    EXPECT_NE(std::string(error.what()).find("cannot build it"), std::string::npos) << error.what();
  }
}

TEST(LocalMode, PlacementGroupsArePlacedOnTheOneNode) {
  auto group = sray::CreatePlacementGroup({.name = "",
                                           .bundles = {{{"CPU", 1}}, {{"CPU", 1}}},
                                           .strategy = sray::PlacementStrategy::kSpread});
  ASSERT_TRUE(group.Wait(std::chrono::seconds(1)));
  EXPECT_EQ(group.BundleNodes(), (std::vector<std::uint32_t>{0, 0}));
  auto member = sray::Actor(Counter::Create).SetPlacementGroup(group, 1).Remote(3);
  EXPECT_EQ(sray::Get(member.Task(&Counter::Value).Remote()), 3);
  sray::RemovePlacementGroup(group);
  EXPECT_THROW((void)sray::Get(member.Task(&Counter::Value).Remote()), sray::ActorDiedError);
  EXPECT_THROW(
      (void)sray::CreatePlacementGroup({.name = "",
                                        .bundles = {{{"CPU", 1}}, {{"CPU", 1}}},
                                        .strategy = sray::PlacementStrategy::kStrictSpread}),
      sray::InfeasibleResourcesError);
}

TEST(LocalMode, ObjectRefsInsideValuesTravelAsReferences) {
  std::vector<sray::ObjectRef<std::int64_t>> refs{sray::Put<std::int64_t>(1),
                                                  sray::Task(Square).Remote(3)};
  EXPECT_EQ(sray::Get(sray::Task(SumOfRefs).Remote(refs)), 10);
  const auto made = sray::Get(sray::Task(PutEach).Remote(4));
  ASSERT_EQ(made.size(), 4U);
  EXPECT_EQ(sray::Get(made), (std::vector<std::int64_t>{0, 10, 20, 30}));
  // A Put value holding references keeps them after the caller's go.
  sray::ObjectRef<std::vector<sray::ObjectRef<std::int64_t>>> outer;
  {
    const std::vector<sray::ObjectRef<std::int64_t>> inner{sray::Put<std::int64_t>(5)};
    outer = sray::Put(inner);
  }
  EXPECT_EQ(sray::Get(sray::Get(outer)).front(), 5);
}

TEST(LocalMode, TheProgramIsOneNodeOfOne) {
  EXPECT_TRUE(sray::IsInitialized());
  const auto node = sray::CurrentNode();
  EXPECT_EQ(node.node_id, 0u);
  EXPECT_EQ(node.num_nodes, 1u);
  EXPECT_EQ(node.role, "head");
  EXPECT_EQ(sray::Get(sray::Task(NodeOfTask).Remote()), 0u);
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  sray::Init(argc, argv, sray::InitOptions{.local_mode = true});
  const int failed = RUN_ALL_TESTS();
  sray::Shutdown();
  return failed;
}
