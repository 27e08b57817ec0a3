// When the end of a step sweeps after crashed steps (spank/step_end_sweep_gate).

#include "step_end_sweep_gate.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>

#include "job_user_process.h"
#include "jobsetup/step_record.h"

namespace sray::spank {
namespace {

using std::chrono::seconds;

class StepEndSweepGateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() /
                 ("sray-sweep-gate-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(directory_);
    std::filesystem::create_directories(directory_);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }
  std::filesystem::path directory_;
};

TEST_F(StepEndSweepGateTest, OneSweepAtATimeAndEveryStepEndSweepsWhileNothingIsLeft) {
  auto first = StepEndSweepGate::Enter(directory_);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(StepEndSweepGate::Enter(directory_), nullptr) << "a second sweep while one runs";
  first->Record(false);
  first.reset();
  auto next = StepEndSweepGate::Enter(directory_);
  ASSERT_NE(next, nullptr) << "after a clean sweep, the next step's end sweeps at once";
}

TEST_F(StepEndSweepGateTest, AfterASweepThatLeftSomethingStepEndsPauseForAMinute) {
  auto gate = StepEndSweepGate::Enter(directory_);
  ASSERT_NE(gate, nullptr);
  gate->Record(true);
  gate.reset();
  const auto now = std::chrono::system_clock::now();
  EXPECT_EQ(StepEndSweepGate::Enter(directory_, now + seconds(5)), nullptr);
  auto later =
      StepEndSweepGate::Enter(directory_, now + StepEndSweepGate::kPauseAfterProblems + seconds(2));
  ASSERT_NE(later, nullptr) << "the pause ends";
}

// A sray step's start sweeps too: it must not overlap a sweep at another
// step's end, which may be working from records read before this step took
// over its paths.
TEST_F(StepEndSweepGateTest, AStepsStartWaitsForAnEndsSweepAndKeepsOthersOutMeanwhile) {
  auto end = StepEndSweepGate::Enter(directory_);
  ASSERT_NE(end, nullptr);
  auto start = std::async(std::launch::async, [this] {
    return StepEndSweepGate::Hold(directory_, std::chrono::steady_clock::now() + seconds(10));
  });
  EXPECT_EQ(start.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout)
      << "the start's sweep did not wait for the end's";
  end.reset();
  auto held = start.get();
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(StepEndSweepGate::Enter(directory_), nullptr) << "an end's sweep during the start's";
  held.reset();
  EXPECT_NE(StepEndSweepGate::Enter(directory_), nullptr);
}

TEST_F(StepEndSweepGateTest, AStepsStartGoesOnWhenAnEndsSweepHangsPastTheDeadline) {
  auto end = StepEndSweepGate::Enter(directory_);
  ASSERT_NE(end, nullptr);
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(StepEndSweepGate::Hold(directory_, started + std::chrono::milliseconds(200)), nullptr);
  EXPECT_LT(std::chrono::steady_clock::now() - started, seconds(2));
}

TEST_F(StepEndSweepGateTest, TheStampIsNotTakenForAStepRecord) {
  auto gate = StepEndSweepGate::Enter(directory_);
  ASSERT_NE(gate, nullptr);
  gate->Record(true);
  auto stale = jobsetup::FindStaleStepRecords(directory_);
  ASSERT_TRUE(stale.ok()) << stale.status().message();
  EXPECT_TRUE(stale->empty()) << "the sweep would drop its own stamp as a corrupt record";
}

// Before: the child that works as the job user is forked under the gate
// and inherited the flock's descriptor; one stuck in a hung tmpdir held the
// lock after the gate was gone, and every sray step's start on the node
// waited 25 s for it.
TEST_F(StepEndSweepGateTest, AJobUserProcessStartedUnderTheGateDoesNotHoldItAfterwards) {
  auto held = StepEndSweepGate::Hold(directory_, std::chrono::steady_clock::now() + seconds(1));
  ASSERT_NE(held, nullptr);
  const std::filesystem::path started = directory_ / "child-started";
  auto child = std::async(std::launch::async, [&started] {
    return RunAsJobUser(
        {.uid = ::getuid(), .gid = ::getgid(), .groups = {}},
        [&started] {
          std::ofstream(started) << "x";
          std::this_thread::sleep_for(std::chrono::seconds(3));  // a hung file system
          return std::string();
        },
        std::chrono::seconds(10));
  });
  const auto give_up = std::chrono::steady_clock::now() + seconds(5);
  while (!std::filesystem::exists(started) && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(std::filesystem::exists(started));
  held.reset();
  EXPECT_NE(StepEndSweepGate::Hold(directory_, std::chrono::steady_clock::now() + seconds(1)),
            nullptr)
      << "the lock went with the gate, though the job user's process still runs";
  EXPECT_TRUE(child.get().ok());
}

}  // namespace
}  // namespace sray::spank
