// The head's record of node heartbeats: which nodes are overdue, when.

#include "core/node_heartbeats.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <vector>

namespace sray::core {
namespace {

using std::chrono::seconds;
using Clock = NodeHeartbeats::Clock;

TEST(NodeHeartbeats, ANodeSilentForLongerThanTheTimeoutIsOverdueOnceAndNodeZeroNever) {
  const Clock::time_point start{};
  NodeHeartbeats heartbeats(3, seconds(30), start);
  EXPECT_TRUE(heartbeats.Overdue(start + seconds(30)).empty())
      << "not before the timeout has passed";
  heartbeats.Beat(1, start + seconds(20));
  EXPECT_EQ(heartbeats.Overdue(start + seconds(31)), std::vector<std::uint32_t>{2})
      << "node 0 is the head's own; node 1 beat 11 s ago";
  EXPECT_TRUE(heartbeats.Overdue(start + seconds(40)).empty()) << "node 2 named once";
  EXPECT_EQ(heartbeats.Overdue(start + seconds(51)), std::vector<std::uint32_t>{1});
}

TEST(NodeHeartbeats, HeartbeatsKeepANodeInAndATimeoutOfZeroNeverDeclaresOne) {
  const Clock::time_point start{};
  NodeHeartbeats heartbeats(2, seconds(3), start);
  for (int second = 1; second <= 60; ++second) {
    heartbeats.Beat(1, start + seconds(second));
    EXPECT_TRUE(
        heartbeats.Overdue(start + seconds(second) + std::chrono::milliseconds(900)).empty());
  }
  heartbeats.Beat(7, start);  // no such node: ignored
  NodeHeartbeats patient(2, seconds(0), start);
  EXPECT_TRUE(patient.Overdue(start + std::chrono::hours(24)).empty());
}

}  // namespace
}  // namespace sray::core
