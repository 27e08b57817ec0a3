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

// The watchdog's looks, every half second from `from` to `to`: the nodes
// found overdue, in order.
std::vector<std::uint32_t> LookEveryHalfSecond(NodeHeartbeats& heartbeats, Clock::time_point from,
                                               Clock::time_point to) {
  std::vector<std::uint32_t> found;
  for (auto now = from; now <= to; now += NodeHeartbeats::kPeriod) {
    for (const auto node : heartbeats.Overdue(now)) found.push_back(node);
  }
  return found;
}

TEST(NodeHeartbeats, ANodeSilentForLongerThanTheTimeoutIsOverdueOnceAndNodeZeroNever) {
  const Clock::time_point start{};
  NodeHeartbeats heartbeats(3, seconds(30), start);
  EXPECT_TRUE(LookEveryHalfSecond(heartbeats, start, start + seconds(30)).empty())
      << "not before the timeout has passed";
  heartbeats.Beat(1, start + seconds(20));
  EXPECT_EQ(LookEveryHalfSecond(heartbeats, start + std::chrono::milliseconds(30500),
                                start + seconds(40)),
            std::vector<std::uint32_t>{2})
      << "node 0 is the head's own; node 1 beat 11 s ago; node 2 is named once";
  EXPECT_EQ(LookEveryHalfSecond(heartbeats, start + std::chrono::milliseconds(40500),
                                start + seconds(51)),
            std::vector<std::uint32_t>{1});
}

TEST(NodeHeartbeats, AHeadThatWasItselfStalledDeclaresNobodyLostForItsPause) {
  const Clock::time_point start{};
  NodeHeartbeats heartbeats(3, seconds(30), start);
  EXPECT_TRUE(LookEveryHalfSecond(heartbeats, start, start + seconds(10)).empty());
  // The head stopped for a minute: the nodes' heartbeats wait unread.
  EXPECT_TRUE(heartbeats.Overdue(start + seconds(70)).empty());
  EXPECT_TRUE(LookEveryHalfSecond(heartbeats, start + std::chrono::milliseconds(70500),
                                  start + seconds(100))
                  .empty())
      << "a full timeout again after the pause";
  EXPECT_EQ(LookEveryHalfSecond(heartbeats, start + std::chrono::milliseconds(100500),
                                start + seconds(101)),
            (std::vector<std::uint32_t>{1, 2}));
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
