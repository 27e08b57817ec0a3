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

namespace sray::core {
namespace {

using std::chrono::milliseconds;

// Before: a timeout beyond 292 years overflowed the clock's nanoseconds in
// the comparison, and every node was overdue at the first look.
TEST(NodeHeartbeats, AnEnormousTimeoutDeclaresNobodyLost) {
  const Clock::time_point start{};
  NodeHeartbeats heartbeats(3, seconds(9'999'999'999), start);
  EXPECT_TRUE(LookEveryHalfSecond(heartbeats, start, start + seconds(120)).empty());
  HeadSilence silence(seconds(9'999'999'999), start);
  EXPECT_FALSE(silence.DeclaredLost(start + seconds(120)));
}

TEST(HeadSilence, ANodeResumedJustAfterTheHeadDeclaredItLostKnowsItWasDeclared) {
  const auto start = Clock::now();
  NodeHeartbeats head(2, seconds(6), start);
  HeadSilence node(seconds(6), start);
  // On a loaded node: asked at 1 s, heard by the head at 1.010 s, its answer
  // handled at 1.6 s; then the node froze.
  const auto asked = start + seconds(1);
  const auto answered = start + milliseconds(1600);
  head.Beat(1, asked + milliseconds(10));
  node.Answered(asked);
  // The head looks every half second and declares node 1 lost at 7.5 s.
  EXPECT_TRUE(LookEveryHalfSecond(head, start, start + milliseconds(7000)).empty());
  EXPECT_EQ(head.Overdue(start + milliseconds(7500)), std::vector<std::uint32_t>{1});
  // Resumed right then: counted from the answer it would be 5.9 s, short of
  // the timeout; counted from the ask it is past it, as at the head.
  const auto resumed = start + milliseconds(7500);
  EXPECT_LE(resumed - answered, seconds(6));
  EXPECT_TRUE(node.DeclaredLost(resumed));
  EXPECT_GT(node.Silent(resumed), seconds(6));
}

TEST(HeadSilence, AnAnswerHandledOnlyAfterAFreezeDoesNotRestartTheCount) {
  const auto start = Clock::now();
  NodeHeartbeats head(2, seconds(6), start);
  HeadSilence node(seconds(6), start);
  // Asked at 1 s and heard at once; the node froze before it handled the
  // answer, and handles it on resuming at 9 s, after the head's declaration.
  const auto asked = start + seconds(1);
  head.Beat(1, asked);
  EXPECT_EQ(LookEveryHalfSecond(head, start, start + seconds(8)), std::vector<std::uint32_t>{1});
  node.Answered(asked);
  // Its next heartbeat fails a second later (UCX timed the endpoint out
  // during the freeze): 9 s of silence since the ask, not 1 since the answer.
  EXPECT_TRUE(node.DeclaredLost(start + seconds(10)));
}

TEST(HeadSilence, AShortSilenceIsNotADeclarationAndAZeroTimeoutNeverIs) {
  const auto start = Clock::now();
  HeadSilence node(seconds(6), start);
  node.Answered(start + seconds(10));
  node.Answered(start + seconds(9));  // an older ask answered late changes nothing
  EXPECT_FALSE(node.DeclaredLost(start + seconds(15)));
  EXPECT_TRUE(node.DeclaredLost(start + seconds(17)));
  HeadSilence never(seconds(0), start);
  EXPECT_FALSE(never.DeclaredLost(start + std::chrono::hours(1)));
}

}  // namespace
}  // namespace sray::core
