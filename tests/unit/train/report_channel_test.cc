#include "train/report_channel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace sray::train::internal {
namespace {

WorkerEvent ReportOf(double loss) {
  WorkerEvent event;
  event.kind = static_cast<std::uint8_t>(WorkerEventKind::kReport);
  event.metrics["loss"] = loss;
  return event;
}

TEST(ReportChannel, PushWaitsUntilTheReportIsTakenAndStored) {
  ReportChannel channel;
  std::atomic<bool> returned{false};
  std::thread loop([&] {
    channel.Push(ReportOf(1));
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(returned.load());
  auto taken = channel.Take();
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->metrics.at("loss"), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(returned.load()) << "taken but not yet stored";
  channel.Acknowledge(1);
  loop.join();
  EXPECT_TRUE(returned.load());
}

TEST(ReportChannel, DeliversReportsInOrderThenNothingOnceClosed) {
  ReportChannel channel;
  std::thread loop([&] {
    for (int index = 0; index < 5; ++index) channel.Push(ReportOf(index));
    channel.Close();
  });
  for (int index = 0; index < 5; ++index) {
    auto taken = channel.Take();
    ASSERT_TRUE(taken);
    EXPECT_EQ(taken->metrics.at("loss"), index);
    channel.Acknowledge(static_cast<std::uint64_t>(index) + 1);
  }
  EXPECT_FALSE(channel.Take());
  loop.join();
}

TEST(ReportChannel, CloseReleasesAWaitingPushAndKeepsItsReport) {
  ReportChannel channel;
  std::thread loop([&] { channel.Push(ReportOf(7)); });
  // Close must find the Push waiting, however late its thread starts.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (channel.pushed() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(channel.pushed(), 1U);
  channel.Close();
  loop.join();
  auto taken = channel.Take();
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->metrics.at("loss"), 7);
  EXPECT_FALSE(channel.Take());
}

}  // namespace
}  // namespace sray::train::internal
