// When a killed actor's worker may serve again: its threads and memory
// compared with before the actor, and the actors it served.

#include "core/worker_reuse.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>

namespace sray::core {
namespace {

TEST(WorkerReuseTest, TheSnapshotCountsAThreadWhileItRuns) {
  const ProcessSnapshot before = TakeProcessSnapshot();
  ASSERT_GE(before.threads, 1u);
  EXPECT_GT(before.resident_bytes, 0u);
  std::mutex mutex;
  std::condition_variable release;
  bool done = false;
  std::thread extra([&] {
    std::unique_lock lock(mutex);
    release.wait(lock, [&] { return done; });
  });
  const ProcessSnapshot during = TakeProcessSnapshot();
  EXPECT_EQ(during.threads, before.threads + 1);
  auto why = WhyNotReusable(before, during, false);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("1 thread(s) of the actor still run"), std::string::npos) << *why;
  {
    std::lock_guard lock(mutex);
    done = true;
  }
  release.notify_one();
  extra.join();
  EXPECT_FALSE(WhyNotReusable(before, TakeProcessSnapshot(), false).has_value());
}

TEST(WorkerReuseTest, MemoryKeptBeyondTheAllowanceOrAnExplicitRequestEndsTheProcess) {
  const ProcessSnapshot before{.threads = 5, .resident_bytes = 20ull << 20};
  ProcessSnapshot after = before;
  after.resident_bytes += kReusableResidentGrowth;
  EXPECT_FALSE(WhyNotReusable(before, after, false).has_value()) << "within the allowance";
  after.resident_bytes += 1ull << 20;
  auto why = WhyNotReusable(before, after, false);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("17 MiB more memory"), std::string::npos) << *why;
  why = WhyNotReusable(before, before, true);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("asked to end the process"), std::string::npos) << *why;
  after = before;
  after.threads = 4;  // a runtime thread that ended meanwhile: still reusable
  EXPECT_FALSE(WhyNotReusable(before, after, false).has_value());
}

TEST(WorkerReuseTest, RunWithinReturnsWhenTheWorkEndsInTime) {
  bool ran = false;
  RunWithin(std::chrono::milliseconds(5000), [&] { ran = true; });
  EXPECT_TRUE(ran);
}

TEST(WorkerReuseDeathTest, RunWithinEndsTheProcessWhenTheWorkOverruns) {
  EXPECT_EXIT(RunWithin(std::chrono::milliseconds(50),
                        [] { std::this_thread::sleep_for(std::chrono::seconds(10)); }),
              ::testing::ExitedWithCode(1), "");
}

}  // namespace
}  // namespace sray::core
