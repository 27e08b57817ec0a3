#include "core/serial_executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace sray::core {
namespace {

using namespace std::chrono_literals;

// Waits up to `limit` for `size()` (read under `mutex`) to exceed `than`.
template <typename Size>
void WaitForMoreThan(std::mutex& mutex, std::size_t than, Size size,
                     std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard lock(mutex);
      if (size() > than) return;
    }
    std::this_thread::sleep_for(1ms);
  }
}

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

// Work posted and not yet taken by the executor's thread (woken, not yet
// running) came after work run inline just after it: a node manager applied
// a task before the cluster view posted ahead of it and found no node.
TEST(SerialExecutor, InlineWorkNeverOvertakesWorkPostedBeforeIt) {
  std::mutex mutex;
  std::vector<int> order;
  {
    SerialExecutor executor;
    for (int round = 0; round < 2000; ++round) {
      executor.Post([&, round] {
        std::lock_guard lock(mutex);
        order.push_back(2 * round);
      });
      executor.RunHereOrPost([&, round] {
        std::lock_guard lock(mutex);
        order.push_back(2 * round + 1);
      });
    }
  }
  ASSERT_EQ(order.size(), 4000U);
  for (std::size_t index = 0; index < order.size(); ++index) {
    ASSERT_EQ(order[index], static_cast<int>(index))
        << "closure " << order[index] << " ran in place " << index;
  }
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
  std::mutex mutex;
  std::vector<std::pair<std::thread::id, std::chrono::steady_clock::time_point>> calls;
  std::atomic<bool> pending{false};
  SerialExecutor executor([&] {
    {
      std::lock_guard lock(mutex);
      calls.emplace_back(std::this_thread::get_id(), std::chrono::steady_clock::now());
    }
    if (!pending.exchange(false)) return std::chrono::milliseconds(0);
    return std::chrono::milliseconds(20);
  });
  // The thread calls the handler once when it starts, then sleeps with no
  // deadline (given a moment after that first call, however late it came).
  WaitForMoreThan(
      mutex, 0, [&] { return calls.size(); }, 10s);
  std::this_thread::sleep_for(50ms);
  std::size_t before = 0;
  {
    std::lock_guard lock(mutex);
    before = calls.size();
  }
  executor.RunHereOrPost([&] { pending = true; });
  std::thread::id inline_caller;
  std::chrono::steady_clock::time_point inline_call;
  {
    std::lock_guard lock(mutex);
    ASSERT_GT(calls.size(), before);
    std::tie(inline_caller, inline_call) = calls[before];
  }
  EXPECT_EQ(inline_caller, std::this_thread::get_id());  // the inline run called it
  // The handler said "again in 20 ms" and nothing else happens: the thread
  // must call it once more by itself, and not before then.
  WaitForMoreThan(
      mutex, before + 1, [&] { return calls.size(); }, 5s);
  std::lock_guard lock(mutex);
  ASSERT_GT(calls.size(), before + 1);
  EXPECT_NE(calls[before + 1].first, std::this_thread::get_id());
  EXPECT_GE(calls[before + 1].second - inline_call, 20ms);
}

// The node manager's thread slept out an actor's 5 s retire deadline while
// retired workers, answering inline, asked for the idle handler in 1 s: the
// surplus workers were asked to end 5 s late.
TEST(SerialExecutor, AnInlineRunsEarlierDeadlineWakesAThreadSleepingWithALaterOne) {
  std::mutex mutex;
  std::vector<std::chrono::steady_clock::time_point> calls;
  std::atomic<int> next_wait_ms{10'000};
  SerialExecutor executor([&] {
    std::lock_guard lock(mutex);
    calls.push_back(std::chrono::steady_clock::now());
    return std::chrono::milliseconds(next_wait_ms.load());
  });
  // The thread's own first call: it then sleeps with a 10 s deadline.
  WaitForMoreThan(
      mutex, 0, [&] { return calls.size(); }, 10s);
  std::this_thread::sleep_for(50ms);
  next_wait_ms = 20;
  const auto inline_run = std::chrono::steady_clock::now();
  std::size_t before = 0;
  {
    std::lock_guard lock(mutex);
    before = calls.size();
  }
  executor.RunHereOrPost([] {});  // its idle handler asks for 20 ms
  next_wait_ms = 10'000;
  WaitForMoreThan(
      mutex, before + 1, [&] { return calls.size(); }, 5s);
  std::lock_guard lock(mutex);
  ASSERT_GT(calls.size(), before + 1) << "the thread slept on to its own 10 s deadline";
  EXPECT_GE(calls[before + 1] - inline_run, 20ms) << "called before the moment asked for";
  EXPECT_LT(calls[before + 1] - inline_run, 2s);
}

TEST(SerialExecutor, StopDuringASlowInlineRunWaitsForItAndEnds) {
  for (const int idle_wait_ms : {0, 20}) {
    SerialExecutor executor([idle_wait_ms] { return std::chrono::milliseconds(idle_wait_ms); });
    std::this_thread::sleep_for(20ms);  // the thread sleeps, with or without a deadline
    std::atomic<bool> inside{false};
    std::atomic<bool> ran{false};
    std::thread caller([&] {
      executor.RunHereOrPost([&] {
        inside = true;
        std::this_thread::sleep_for(100ms);
        ran = true;
      });
    });
    while (!inside.load()) std::this_thread::sleep_for(1ms);
    executor.Stop();  // hung here: the thread held the lock the inline run needed to end
    caller.join();
    EXPECT_TRUE(ran.load());
  }
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
