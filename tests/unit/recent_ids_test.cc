#include "common/recent_ids.h"

#include <gtest/gtest.h>

namespace sray {
namespace {

TEST(RecentIds, KeepsTheLatestOnes) {
  RecentIds recent(2);
  recent.Add(1);
  recent.Add(2);
  recent.Add(2);
  EXPECT_TRUE(recent.Contains(1));
  recent.Add(3);
  EXPECT_FALSE(recent.Contains(1)) << "the oldest gives way";
  EXPECT_TRUE(recent.Contains(2));
  EXPECT_TRUE(recent.Contains(3));
}

// A worker's rank is removed when a worker starts under it and added again
// when that one ends: the new end is kept for a full capacity, not dropped
// with the old one's place in line.
TEST(RecentIds, AnIdRemovedAndAddedAgainIsKeptForAFullCapacity) {
  RecentIds recent(3);
  recent.Add(7);
  recent.Remove(7);
  EXPECT_FALSE(recent.Contains(7));
  recent.Add(7);
  recent.Add(8);
  recent.Add(9);  // pushes out the first Add of 7, not the second
  EXPECT_TRUE(recent.Contains(7));
  recent.Add(10);
  recent.Add(11);
  EXPECT_FALSE(recent.Contains(7));
  EXPECT_TRUE(recent.Contains(11));
}

}  // namespace
}  // namespace sray
