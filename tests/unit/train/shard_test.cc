#include "train/shard.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

namespace sray::train::internal {
namespace {

std::vector<std::vector<std::size_t>> AllShards(std::size_t size, int world, std::uint64_t epoch,
                                                bool drop_last = false) {
  std::vector<std::vector<std::size_t>> shards;
  for (int rank = 0; rank < world; ++rank) {
    shards.push_back(ShardIndices({size, world, rank, true, 3, epoch, drop_last}));
  }
  return shards;
}

TEST(DistributedShards, AreDisjointAndCoverEverySampleOncePerEpoch) {
  for (int world : {1, 2, 3, 4}) {
    const auto shards = AllShards(120, world, 0);
    std::multiset<std::size_t> seen;
    for (const auto& shard : shards) {
      EXPECT_EQ(shard.size(), 120U / static_cast<std::size_t>(world));
      seen.insert(shard.begin(), shard.end());
    }
    ASSERT_EQ(seen.size(), 120U) << "world " << world;
    for (std::size_t sample = 0; sample < 120; ++sample) EXPECT_EQ(seen.count(sample), 1U) << sample;
  }
}

TEST(DistributedShards, PadUnevenDatasetsSoEveryWorkerRunsTheSameSteps) {
  const auto shards = AllShards(10, 3, 0);
  std::set<std::size_t> covered;
  for (const auto& shard : shards) {
    EXPECT_EQ(shard.size(), 4U);  // ceil(10 / 3)
    covered.insert(shard.begin(), shard.end());
  }
  EXPECT_EQ(covered.size(), 10U);  // every sample, two of them twice
}

TEST(DistributedShards, DropLastDropsTheTailInstead) {
  const auto shards = AllShards(10, 3, 0, true);
  std::set<std::size_t> covered;
  for (const auto& shard : shards) {
    EXPECT_EQ(shard.size(), 3U);
    covered.insert(shard.begin(), shard.end());
  }
  EXPECT_EQ(covered.size(), 9U);
}

TEST(DistributedShards, ChangeWithTheEpochAndRepeatForTheSameEpoch) {
  EXPECT_NE(AllShards(100, 2, 0)[0], AllShards(100, 2, 1)[0]);
  EXPECT_EQ(AllShards(100, 2, 5)[1], AllShards(100, 2, 5)[1]);
}

TEST(DistributedShards, WithoutShuffleTakeEveryWorldSizethSample) {
  EXPECT_EQ(ShardIndices({7, 2, 1, false, 0, 0, false}), (std::vector<std::size_t>{1, 3, 5, 0}));
}

}  // namespace
}  // namespace sray::train::internal
