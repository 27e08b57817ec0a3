#include "transport/yield_pacer.h"

#include <gtest/gtest.h>

#include <vector>

namespace sray::transport {
namespace {

using std::chrono::microseconds;
using Clock = YieldPacer::Clock;

// A clock the test moves, and a yield that takes as long as the test says
// (how long other threads ran on the core meanwhile).
Clock::time_point fake_now{};
microseconds next_yield_takes{1};
int yields = 0;

Clock::time_point FakeNow() {
  return fake_now;
}
void FakeYield() {
  ++yields;
  fake_now += next_yield_takes;
}

class YieldPacerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_now = Clock::time_point{} + std::chrono::seconds(1);
    next_yield_takes = microseconds(1);
    yields = 0;
  }
  // Polls for `how_long`, one poll a microsecond; returns the yields made.
  static int PollFor(YieldPacer& pacer, microseconds how_long) {
    const int before = yields;
    const Clock::time_point end = fake_now + how_long;
    while (fake_now < end) {
      pacer.MaybeYield(fake_now);
      fake_now += microseconds(1);
    }
    return yields - before;
  }
};

TEST_F(YieldPacerTest, DoesNotYieldBeforeTheShortestInterval) {
  YieldPacer pacer(fake_now, &FakeYield, &FakeNow);
  pacer.MaybeYield(fake_now + microseconds(1));
  EXPECT_EQ(yields, 0);
  pacer.MaybeYield(fake_now + YieldPacer::kShortest);
  EXPECT_EQ(yields, 1);
}

TEST_F(YieldPacerTest, YieldsThatComeStraightBackSpaceOutToTheLongest) {
  YieldPacer pacer(fake_now, &FakeYield, &FakeNow);
  std::vector<microseconds> intervals;
  for (int poll = 0; poll < 2000 && intervals.size() < 8; ++poll) {
    const int before = yields;
    pacer.MaybeYield(fake_now);
    if (yields != before)
      intervals.push_back(std::chrono::duration_cast<microseconds>(pacer.interval()));
    fake_now += microseconds(1);
  }
  ASSERT_EQ(intervals.size(), 8U);
  EXPECT_EQ(intervals.front(), microseconds(4));
  for (std::size_t i = 1; i < intervals.size(); ++i) EXPECT_GE(intervals[i], intervals[i - 1]);
  EXPECT_EQ(intervals.back(), YieldPacer::kLongest);
  // Idle on its own core: at most one yield in 50 us.
  EXPECT_LE(PollFor(pacer, microseconds(1000)), 21);
}

TEST_F(YieldPacerTest, AYieldThatGaveTheCoreAwayBringsTheIntervalBackToTheShortest) {
  YieldPacer pacer(fake_now, &FakeYield, &FakeNow);
  PollFor(pacer, microseconds(1000));
  ASSERT_EQ(pacer.interval(), YieldPacer::kLongest);
  next_yield_takes = microseconds(30);  // another thread ran meanwhile
  PollFor(pacer, microseconds(60));
  EXPECT_EQ(pacer.interval(), YieldPacer::kShortest);
  // While others want the core it keeps yielding often: the core is shared.
  const int under_contention = PollFor(pacer, microseconds(1000));
  next_yield_takes = microseconds(1);
  YieldPacer idle(fake_now, &FakeYield, &FakeNow);
  PollFor(idle, microseconds(1000));
  const int idle_yields = PollFor(idle, microseconds(1000));
  EXPECT_GT(under_contention, idle_yields);
}

TEST_F(YieldPacerTest, AfterARestartTheNextYieldIsOneLearnedIntervalAway) {
  YieldPacer pacer(fake_now, &FakeYield, &FakeNow);
  PollFor(pacer, microseconds(1000));
  ASSERT_EQ(pacer.interval(), YieldPacer::kLongest);
  fake_now += std::chrono::milliseconds(5);  // slept, or ran a task
  pacer.Restart(fake_now);
  const int before = yields;
  pacer.MaybeYield(fake_now);
  pacer.MaybeYield(fake_now + microseconds(49));
  EXPECT_EQ(yields, before) << "no yield just as polling resumes";
  pacer.MaybeYield(fake_now + microseconds(50));
  EXPECT_EQ(yields, before + 1);
}

}  // namespace
}  // namespace sray::transport
