// The group's rendezvous table (c10d Store semantics), real Gloo groups
// meeting through it, and the member tags that stop a group whose
// connections do not all join its own workers. Each rank is a thread with its
// own Gloo process group over loopback TCP.

#include "train/rendezvous_table.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "train/collectives.h"
#include "train/member_tag.h"

namespace sray::train::internal {
namespace {

TEST(RendezvousTable, CountsComparesAndWaitsAsCTenDStoresDo) {
  RendezvousTable table;
  EXPECT_EQ(table.Add("count", 2), 2);
  EXPECT_EQ(table.Add("count", 3), 5);
  EXPECT_EQ(table.GetAll({"count"})->front(), "5") << "counts are stored as decimal text";
  table.Set("address", std::string("\0\x01\xff", 3));
  EXPECT_THROW(table.Add("address", 1), std::invalid_argument);
  EXPECT_FALSE(table.GetAll({"address", "missing"}).has_value()) << "nothing until every key is there";
  EXPECT_EQ(table.GetAll({"address"})->front(), std::string("\0\x01\xff", 3));
  EXPECT_TRUE(table.Check({"address", "count"}));
  EXPECT_FALSE(table.Check({"address", "missing"}));

  EXPECT_EQ(table.CompareSet("missing", "expected", "new"), "expected") << "a missing key with an expectation";
  EXPECT_FALSE(table.Check({"missing"}));
  EXPECT_EQ(table.CompareSet("fresh", "", "first"), "first") << "a missing key with no expectation";
  EXPECT_EQ(table.CompareSet("fresh", "wrong", "second"), "first");
  EXPECT_EQ(table.CompareSet("fresh", "first", "second"), "second");

  EXPECT_EQ(table.NumKeys(), 3);
  EXPECT_TRUE(table.Delete("fresh"));
  EXPECT_FALSE(table.Delete("fresh"));
  EXPECT_EQ(table.NumKeys(), 2);
}

TEST(MemberTag, DiffersByDirectionAndBySecret) {
  EXPECT_EQ(TagFor("secret", 0, 1), TagFor("secret", 0, 1));
  EXPECT_NE(TagFor("secret", 0, 1), TagFor("secret", 1, 0)) << "one direction's tag tells nothing of the other";
  EXPECT_NE(TagFor("secret", 0, 1), TagFor("other", 0, 1));
}

// Runs `world` ranks; returns each rank's error ("" when it succeeded).
std::vector<std::string> RunRanks(int world, const std::function<GroupOptions(int)>& options_of,
                                  const std::function<void(Collectives&)>& body) {
  std::vector<std::thread> ranks;
  std::vector<std::string> errors(static_cast<std::size_t>(world));
  for (int rank = 0; rank < world; ++rank) {
    ranks.emplace_back([&, rank] {
      try {
        at::set_num_threads(1);
        auto collectives = Collectives::Connect(options_of(rank));
        body(*collectives);
      } catch (const std::exception& error) {
        errors[static_cast<std::size_t>(rank)] = error.what();
      }
    });
  }
  for (auto& rank : ranks) rank.join();
  return errors;
}

GroupOptions Options(const std::shared_ptr<RendezvousTable>& table, int rank, int world, std::string secret) {
  GroupOptions options;
  options.rank = rank;
  options.world_size = world;
  options.rendezvous = table;
  options.group_secret = std::move(secret);
  options.timeout = std::chrono::seconds(30);
  return options;
}

TEST(TrainingGroup, MeetsThroughTheRendezvousAndVerifiesItsMembers) {
  const int world = 3;
  auto table = std::make_shared<RendezvousTable>();
  std::vector<double> sums(world);
  const auto errors = RunRanks(
      world, [&](int rank) { return Options(table, rank, world, "the group's secret"); },
      [&](Collectives& collectives) {
        at::Tensor value = at::full({1}, static_cast<double>(collectives.rank() + 1), at::kDouble);
        collectives.AllReduceSum(value);
        sums[static_cast<std::size_t>(collectives.rank())] = value.item<double>();
      });
  for (int rank = 0; rank < world; ++rank) {
    EXPECT_EQ(errors[static_cast<std::size_t>(rank)], "") << "rank " << rank;
    EXPECT_EQ(sums[static_cast<std::size_t>(rank)], 6.0) << "rank " << rank;
  }
}

// A member without the group's secret stands for a process that took over
// its connections: it can neither answer nor replay a tag, and every rank
// stops before the first collective of the run.
TEST(TrainingGroup, StopsOnEveryRankWhenOneMemberLacksTheSecret) {
  const int world = 3;
  auto table = std::make_shared<RendezvousTable>();
  std::atomic<bool> reached_training = false;
  const auto errors = RunRanks(
      world, [&](int rank) { return Options(table, rank, world, rank == 2 ? "a guess" : "the group's secret"); },
      [&](Collectives&) { reached_training = true; });
  EXPECT_FALSE(reached_training.load());
  for (int rank = 0; rank < world; ++rank) {
    EXPECT_NE(errors[static_cast<std::size_t>(rank)].find("does not carry that worker's member tag"), std::string::npos)
        << "rank " << rank << ": " << errors[static_cast<std::size_t>(rank)];
  }
  EXPECT_NE(errors[0].find("from rank 2 to rank 0"), std::string::npos) << errors[0];
}

TEST(TrainingGroup, ARankThatNeverJoinsFailsTheRendezvousWithinItsTimeout) {
  auto table = std::make_shared<RendezvousTable>();
  GroupOptions alone = Options(table, 0, 2, "secret");
  alone.timeout = std::chrono::milliseconds(500);
  const auto start = std::chrono::steady_clock::now();
  try {
    Collectives::Connect(alone);
    FAIL() << "a group of two formed with one rank";
  } catch (const std::exception& error) {
    EXPECT_NE(std::string(error.what()).find("rendezvous timed out"), std::string::npos) << error.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace sray::train::internal
