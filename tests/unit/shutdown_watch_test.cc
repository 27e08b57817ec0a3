#include "core/shutdown_watch.h"

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace sray::core {
namespace {

struct Said {
  std::mutex mutex;
  std::vector<std::string> lines;
  std::function<void(const std::string&)> Sink() {
    return [this](const std::string& line) {
      std::lock_guard lock(mutex);
      lines.push_back(line);
    };
  }
  std::vector<std::string> Lines() {
    std::lock_guard lock(mutex);
    return lines;
  }
  // Waits (a loaded machine may be slow to run the watch) for a line.
  bool WaitForALine() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (Lines().empty()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }
};

TEST(ShutdownWatch, NamesAStepThatRunsPastItsPatienceOnce) {
  Said said;
  {
    ShutdownWatch watch(std::chrono::milliseconds(50), said.Sink());
    watch.Step("stopping the dashboard");
    ASSERT_TRUE(said.WaitForALine());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // no second line
  }
  const auto lines = said.Lines();
  ASSERT_EQ(lines.size(), 1U);
  EXPECT_NE(lines[0].find("sray: ending the job: stopping the dashboard has taken 0.05 s"),
            std::string::npos)
      << lines[0];
}

TEST(ShutdownWatch, SaysNothingOfStepsThatEndInTime) {
  Said said;
  {
    ShutdownWatch watch(std::chrono::seconds(30), said.Sink());
    watch.Step("telling the nodes to end");
    watch.Step("ending this node's workers");
  }
  EXPECT_TRUE(said.Lines().empty());
}

TEST(ShutdownWatch, NamesTheSlowStepNotTheOnesBeforeIt) {
  Said said;
  {
    ShutdownWatch watch(std::chrono::seconds(2), said.Sink());
    watch.Step("quick step");
    watch.Step("slow step");
    ASSERT_TRUE(said.WaitForALine());
  }
  const auto lines = said.Lines();
  ASSERT_EQ(lines.size(), 1U);
  EXPECT_NE(lines[0].find("slow step has taken"), std::string::npos) << lines[0];
}

}  // namespace
}  // namespace sray::core
