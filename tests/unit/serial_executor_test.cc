#include "core/serial_executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

namespace sray::core {
namespace {

using namespace std::chrono_literals;

TEST(SerialExecutor, AnIdleExecutorRunsWorkOnTheCallingThread) {
  SerialExecutor executor;
  std::thread::id ran_on;
  executor.RunHereOrPost([&] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(SerialExecutor, WorkArrivingWhileAClosureRunsWaitsForItInOrder) {
  SerialExecutor executor;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> started;
  std::mutex mutex;
  std::vector<int> order;
  auto record = [&](int step) {
    std::lock_guard lock(mutex);
    order.push_back(step);
  };
  executor.Post([&, released] {
    started.set_value();
    released.wait();
    record(1);
  });
  started.get_future().wait();
  // Neither may run here: the posted closure has not finished.
  executor.RunHereOrPost([&] { record(2); });
  executor.Post([&] { record(3); });
  executor.RunHereOrPost([&] { record(4); });
  {
    std::lock_guard lock(mutex);
    EXPECT_TRUE(order.empty());
  }
  release.set_value();
  executor.Stop();
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4}));
}

TEST(SerialExecutor, WorkQueuedDuringAnInlineRunIsRunByThatRun) {
  SerialExecutor executor;
  std::vector<int> order;
  std::thread::id second_ran_on;
  executor.RunHereOrPost([&] {
    order.push_back(1);
    // From inside a closure: queued, then drained by this inline run.
    executor.RunHereOrPost([&] {
      order.push_back(2);
      second_ran_on = std::this_thread::get_id();
    });
    EXPECT_EQ(order.size(), 1u);
  });
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_EQ(second_ran_on, std::this_thread::get_id());
}

TEST(SerialExecutor, ClosuresNeverOverlap) {
  SerialExecutor executor;
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::atomic<int> ran{0};
  auto work = [&] {
    if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
    std::this_thread::yield();
    inside.fetch_sub(1);
    ran.fetch_add(1);
  };
  constexpr int kCallers = 4;
  std::vector<std::thread> callers;
  callers.reserve(kCallers);
  for (int caller = 0; caller < kCallers; ++caller) {
    callers.emplace_back([&, caller] {
      for (int index = 0; index < 2000; ++index) {
        if ((index + caller) % 3 == 0) {
          executor.Post(work);
        } else {
          executor.RunHereOrPost(work);
        }
      }
    });
  }
  for (auto& caller : callers) caller.join();
  executor.Stop();
  EXPECT_EQ(overlaps.load(), 0);
  EXPECT_EQ(ran.load(), kCallers * 2000);
}

// The node manager's broadcast asks to be called again within milliseconds
// when it changed too recently; after an inline run the executor's thread,
// asleep without a deadline, must still call it then (a version that woke
// the thread without making it look again lost the broadcast).
TEST(SerialExecutor, AnIdleHandlerAskingForLaterIsCalledAgainAfterAnInlineRun) {
  std::atomic<int> calls{0};
  std::atomic<bool> pending{false};
  SerialExecutor executor([&] {
    calls.fetch_add(1);
    if (!pending.exchange(false)) return std::chrono::milliseconds(0);
    return std::chrono::milliseconds(5);
  });
  std::this_thread::sleep_for(50ms);  // the thread now sleeps with no deadline
  const int before = calls.load();
  executor.RunHereOrPost([&] { pending = true; });
  EXPECT_EQ(calls.load(), before + 1);  // after the inline run, on this thread
  // The handler said "again in 5 ms" and nothing else happens: the thread
  // must call it once more by itself.
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (calls.load() < before + 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(1ms);
  }
  EXPECT_GE(calls.load(), before + 2);
}

TEST(SerialExecutor, StopRunsWhatWasPostedThenRefusesMore) {
  auto executor = std::make_unique<SerialExecutor>();
  std::atomic<int> ran{0};
  for (int index = 0; index < 100; ++index) executor->Post([&] { ran.fetch_add(1); });
  executor->Stop();
  EXPECT_EQ(ran.load(), 100);
  executor->RunHereOrPost([&] { ran.fetch_add(1); });
  executor->Post([&] { ran.fetch_add(1); });
  EXPECT_EQ(ran.load(), 100);
}

}  // namespace
}  // namespace sray::core
