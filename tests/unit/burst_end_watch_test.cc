#include "transport/burst_end_watch.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>

namespace sray::transport {
namespace {

using Moment = BurstEndWatch::Moment;
using std::chrono::milliseconds;

// Drives a watch one window at a time, `messages_in_window` messages each.
class Windows {
 public:
  Windows() : watch_(now_, 0) {}
  Moment Next(std::uint64_t messages_in_window) {
    now_ += BurstEndWatch::kWindow;
    messages_ += messages_in_window;
    return watch_.Observe(now_, messages_);
  }

 private:
  BurstEndWatch::Clock::time_point now_{};
  std::uint64_t messages_ = 0;
  BurstEndWatch watch_;
};

TEST(BurstEndWatch, SteadyBackgroundTrafficIsNeverABurst) {
  Windows windows;
  for (int window = 0; window < 100; ++window) EXPECT_EQ(windows.Next(500), Moment::kNothing);
}

TEST(BurstEndWatch, TheFirstQuietWindowAfterABurstEndsItOnce) {
  Windows windows;
  EXPECT_EQ(windows.Next(3), Moment::kNothing);
  EXPECT_EQ(windows.Next(50'000), Moment::kNothing);
  EXPECT_EQ(windows.Next(80'000), Moment::kNothing);
  EXPECT_EQ(windows.Next(900), Moment::kBurstEnded);  // heartbeats of many nodes stay
  EXPECT_EQ(windows.Next(900), Moment::kQuiet);
}

TEST(BurstEndWatch, ABurstStartingLateInAWindowIsStillSeen) {
  Windows windows;
  EXPECT_EQ(windows.Next(700), Moment::kNothing);  // its first tenth of a second
  EXPECT_EQ(windows.Next(10'000), Moment::kNothing);
  EXPECT_EQ(windows.Next(10'000), Moment::kNothing);
  EXPECT_EQ(windows.Next(3), Moment::kBurstEnded);
}

TEST(BurstEndWatch, BusyTrafficAfterABurstEndsTheQuietAndCanEndAgain) {
  Windows windows;
  EXPECT_EQ(windows.Next(60'000), Moment::kNothing);
  EXPECT_EQ(windows.Next(3'000), Moment::kBurstEnded);
  // The process allocates enough for jemalloc to decay by itself.
  for (int window = 0; window < 5; ++window) EXPECT_EQ(windows.Next(3'000), Moment::kNothing);
  EXPECT_EQ(windows.Next(48'000), Moment::kNothing);
  EXPECT_EQ(windows.Next(2'500), Moment::kBurstEnded);
}

TEST(BurstEndWatch, TrafficTooSlightToMatterNeverEnds) {
  Windows windows;
  EXPECT_EQ(windows.Next(999), Moment::kNothing);
  for (int window = 0; window < 20; ++window) EXPECT_EQ(windows.Next(0), Moment::kNothing);
}

TEST(BurstEndWatch, ASlowingBurstIsNotOverUntilBelowASixteenthOfItsPeak) {
  Windows windows;
  EXPECT_EQ(windows.Next(16'000), Moment::kNothing);
  EXPECT_EQ(windows.Next(8'000), Moment::kNothing);
  EXPECT_EQ(windows.Next(1'000), Moment::kNothing);
  EXPECT_EQ(windows.Next(999), Moment::kBurstEnded);
}

TEST(BurstEndWatch, QuietLastsForTheAllocatorsDecayThenNothing) {
  Windows windows;
  EXPECT_EQ(windows.Next(10'000), Moment::kNothing);
  EXPECT_EQ(windows.Next(0), Moment::kBurstEnded);
  const auto quiet_windows = BurstEndWatch::kDecayFor / BurstEndWatch::kWindow;
  for (int window = 0; window < quiet_windows; ++window) EXPECT_EQ(windows.Next(0), Moment::kQuiet);
  EXPECT_EQ(windows.Next(0), Moment::kNothing);
  EXPECT_EQ(windows.Next(0), Moment::kNothing);
}

TEST(BurstEndWatch, ANewBurstWhileQuietEndsTheQuietAndEndsAgainLater) {
  Windows windows;
  EXPECT_EQ(windows.Next(10'000), Moment::kNothing);
  EXPECT_EQ(windows.Next(0), Moment::kBurstEnded);
  EXPECT_EQ(windows.Next(0), Moment::kQuiet);
  EXPECT_EQ(windows.Next(20'000), Moment::kNothing);
  EXPECT_EQ(windows.Next(20'000), Moment::kNothing);
  EXPECT_EQ(windows.Next(100), Moment::kBurstEnded);
}

TEST(BurstEndWatch, ObservationsWithinAWindowSayNothing) {
  BurstEndWatch::Clock::time_point now{};
  BurstEndWatch watch(now, 0);
  EXPECT_EQ(watch.Observe(now + milliseconds(999), 1'000'000), Moment::kNothing);
  EXPECT_EQ(watch.Observe(now + milliseconds(1000), 1'000'000), Moment::kNothing);  // the burst
  EXPECT_EQ(watch.Observe(now + milliseconds(1500), 1'000'000), Moment::kNothing);
  EXPECT_EQ(watch.Observe(now + milliseconds(2000), 1'000'000), Moment::kBurstEnded);
}

}  // namespace
}  // namespace sray::transport
