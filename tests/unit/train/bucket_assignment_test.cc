#include "train/bucket_assignment.h"

#include <gtest/gtest.h>

#include <set>

namespace sray::train::internal {
namespace {

TEST(BucketAssignment, GoesInReverseParameterOrderWithASmallerFirstBucket) {
  // Five parameters of 400 bytes: the first bucket closes at 400, the
  // others at 1000.
  const std::vector<BucketParameter> parameters(5, {400, 0});
  const auto buckets = AssignBuckets(parameters, 400, 1000);
  ASSERT_EQ(buckets.size(), 3U);
  EXPECT_EQ(buckets[0], (std::vector<std::size_t>{4}));
  EXPECT_EQ(buckets[1], (std::vector<std::size_t>{3, 2, 1}));
  EXPECT_EQ(buckets[2], (std::vector<std::size_t>{0}));
}

TEST(BucketAssignment, PutsEveryParameterInExactlyOneBucket) {
  std::vector<BucketParameter> parameters;
  for (std::size_t index = 0; index < 50; ++index) parameters.push_back({(index * 37) % 500 + 1, 0});
  std::set<std::size_t> seen;
  for (const auto& bucket : AssignBuckets(parameters, 100, 2000)) {
    for (std::size_t index : bucket) EXPECT_TRUE(seen.insert(index).second) << index;
  }
  EXPECT_EQ(seen.size(), 50U);
}

TEST(BucketAssignment, KeepsKindsApart) {
  const std::vector<BucketParameter> parameters{{100, 1}, {100, 2}, {100, 1}, {100, 2}};
  for (const auto& bucket : AssignBuckets(parameters, 1U << 20U, 1U << 20U)) {
    for (std::size_t index : bucket) EXPECT_EQ(parameters[index].kind, parameters[bucket.front()].kind);
  }
  EXPECT_EQ(AssignBuckets(parameters, 1U << 20U, 1U << 20U).size(), 2U);
}

TEST(BucketAssignment, OneLargeParameterFillsABucketAlone) {
  const std::vector<BucketParameter> parameters{{10, 0}, {5000, 0}, {10, 0}};
  const auto buckets = AssignBuckets(parameters, 100, 1000);
  ASSERT_EQ(buckets.size(), 2U);
  EXPECT_EQ(buckets[0], (std::vector<std::size_t>{2, 1}));
  EXPECT_EQ(buckets[1], (std::vector<std::size_t>{0}));
}

}  // namespace
}  // namespace sray::train::internal
