#include "transport/long_operations.h"

#include <gtest/gtest.h>

#include <atomic>

#include <chrono>
#include <future>
#include <optional>
#include <thread>

#include "transport/progress_loop.h"
#include "transport/ucx_handles.h"

namespace sray::transport {
namespace {

using std::chrono::microseconds;
using std::chrono::seconds;

TEST(LongOperations, AWaiterReturnsAtOnceWhenNoneRuns) {
  LongOperations operations;
  EXPECT_FALSE(operations.any());
  EXPECT_TRUE(operations.WaitUntilNone(seconds(10)));
}

TEST(LongOperations, AWaiterWaitsForTheLastOperationAndNoLonger) {
  LongOperations operations;
  std::optional<LongOperations::Scope> first(std::in_place, operations);
  std::optional<LongOperations::Scope> second(std::in_place, operations);
  EXPECT_TRUE(operations.any());
  EXPECT_FALSE(operations.WaitUntilNone(microseconds(1000))) << "gives up at its limit";

  const auto started = std::chrono::steady_clock::now();
  auto waited = std::async(std::launch::async, [&] {
    return operations.WaitUntilNone(std::chrono::duration_cast<microseconds>(seconds(30)));
  });
  // Blocked before the operations end, so that their end must wake it.
  while (operations.waiting() == 0) std::this_thread::yield();
  first.reset();
  EXPECT_EQ(waited.wait_for(std::chrono::milliseconds(50)), std::future_status::timeout)
      << "one operation still runs";
  second.reset();
  EXPECT_TRUE(waited.get());
  EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(10))
      << "woken by the end, not by its limit";
  EXPECT_FALSE(operations.any());
}

// Counts what the progress thread does besides progressing the worker.
class CountingClient final : public ProgressLoop::Client {
 public:
  bool SendPosted() override {
    sends.fetch_add(1);
    return false;
  }
  [[nodiscard]] bool HasPosted() const override { return false; }
  void Housekeeping(std::chrono::steady_clock::time_point) override { housekeeping.fetch_add(1); }
  std::atomic<int> sends{0};
  std::atomic<int> housekeeping{0};
};

// While another thread creates endpoints back to back, the progress thread
// stays off the worker, yet still does its housekeeping, is not taken for
// parked (posters would send on the locked worker themselves), and stops at
// once when asked.
TEST(LongOperations, TheProgressThreadWaitsForThemButKeepsItsPromises) {
  auto context = UcxContext::Create("");
  ASSERT_TRUE(context.ok()) << context.status().message();
  auto worker = UcxWorker::Create(*context);
  ASSERT_TRUE(worker.ok()) << worker.status().message();
  CountingClient client;
  LongOperations operations;
  ProgressLoop loop(*worker, client, &operations);
  std::optional<LongOperations::Scope> connecting(std::in_place, operations);
  ASSERT_TRUE(loop.Start().ok());
  while (operations.waiting() == 0) std::this_thread::yield();
  const int housekeeping_before = client.housekeeping.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_GE(client.housekeeping.load() - housekeeping_before, 5)
      << "housekeeping at least every 500 us, give or take a loaded machine";
  EXPECT_FALSE(loop.progress_thread_parked());
  const auto stopping = std::chrono::steady_clock::now();
  loop.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - stopping, std::chrono::seconds(1));
  connecting.reset();
}

}  // namespace
}  // namespace sray::transport
