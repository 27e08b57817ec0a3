#include "crashed_steps.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "common/process_stat.h"
#include "jobsetup/node_shared_memory.h"
#include "jobsetup/step_processes.h"
#include "jobsetup/step_record.h"

namespace sray::spank {
namespace {

// A step of this test's user on node 1, as a crashed slurmstepd left it: a
// process still running, its session directory, and two files in /dev/shm.
class CrashedStepsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string unique = std::to_string(::getpid());
    job_ = "crashtest" + unique;
    base_ = std::filesystem::temp_directory_path() / ("sray-crashed-steps-test-" + unique);
    std::filesystem::remove_all(base_);
    auto directory = jobsetup::PrepareRecordDirectory(base_ / "state", "n2");
    ASSERT_TRUE(directory.ok()) << directory.status().message();
    records_ = *directory;
    session_ = base_ / "sray-session";
    std::filesystem::create_directories(session_ / "logs");
    std::ofstream(session_ / "logs" / "worker.log") << "output";
    const std::string prefix = jobsetup::NodeSharedMemoryPrefix(job_, "0", 1);
    shared_memory_ = {std::filesystem::path(jobsetup::kSharedMemoryDirectory) / (prefix + ".0.1"),
                      std::filesystem::path(jobsetup::kSharedMemoryDirectory) / (prefix + ".ucx")};
    std::ofstream(shared_memory_[0]) << "object";
    std::filesystem::create_directory(shared_memory_[1]);
  }
  void TearDown() override {
    if (task_ > 0) {
      ::kill(task_, SIGKILL);
      ::waitpid(task_, nullptr, 0);
    }
    std::filesystem::remove_all(base_);
    for (const auto& path : shared_memory_) std::filesystem::remove_all(path);
  }

  // A task of the step: the variables every task of node 1 has.
  void StartTask() {
    task_ = ::fork();
    if (task_ == 0) {
      ::setsid();
      ::setenv("SRAY_SESSION_DIR", session_.c_str(), 1);
      ::setenv("SRAY_NODE_ID", "1", 1);
      ::execl("/bin/sleep", "sleep", "60", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    const jobsetup::StepProcessSelector selector{
        .uid = ::getuid(), .session_directory = session_, .node_id = 1};
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (jobsetup::FindStepProcesses(selector).empty() &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  jobsetup::StepRecord Record(pid_t daemon) const {
    return {.daemon_pid = daemon,
            .daemon_start_time = ProcessStartTime(daemon),
            .uid = ::getuid(),
            .gid = ::getgid(),
            .groups = {},
            .job_id = job_,
            .step_id = "0",
            .node_id = 1,
            .session_directory = session_};
  }

  // The record of the step, written by a slurmstepd that ran and is gone.
  void WriteDeadDaemonsRecord() {
    const pid_t daemon = ::fork();
    if (daemon == 0) {
      ::pause();
      ::_exit(0);
    }
    const jobsetup::StepRecord record = Record(daemon);
    ::kill(daemon, SIGKILL);
    ::waitpid(daemon, nullptr, 0);
    ASSERT_TRUE(jobsetup::WriteStepRecord(records_, record).ok());
  }

  bool NothingLeft() const {
    return !std::filesystem::exists(session_) && !std::filesystem::exists(shared_memory_[0]) &&
           !std::filesystem::exists(shared_memory_[1]);
  }

  std::string job_;
  std::filesystem::path base_;
  std::filesystem::path records_;
  std::filesystem::path session_;
  std::vector<std::filesystem::path> shared_memory_;
  pid_t task_ = -1;
};

TEST_F(CrashedStepsTest, ADeadDaemonsStepLosesItsProcessesFilesAndRecord) {
  StartTask();
  ASSERT_NO_FATAL_FAILURE(WriteDeadDaemonsRecord());

  const CrashedStepSweep sweep = CleanUpAfterCrashedSteps(records_);
  EXPECT_TRUE(sweep.problems.empty()) << sweep.problems.front();
  ASSERT_EQ(sweep.cleaned.size(), 1U);
  EXPECT_EQ(sweep.cleaned[0], job_ + ".0 (node 1)");
  EXPECT_EQ(sweep.processes_ended, 1U);
  int status = 0;
  ASSERT_EQ(::waitpid(task_, &status, 0), task_);
  task_ = -1;
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_TRUE(NothingLeft());
  EXPECT_TRUE(std::filesystem::is_empty(records_));
}

TEST_F(CrashedStepsTest, ALiveDaemonsStepIsLeftAlone) {
  StartTask();
  ASSERT_TRUE(jobsetup::WriteStepRecord(records_, Record(::getpid())).ok());
  const CrashedStepSweep sweep = CleanUpAfterCrashedSteps(records_);
  EXPECT_TRUE(sweep.cleaned.empty());
  EXPECT_TRUE(sweep.problems.empty());
  EXPECT_EQ(::waitpid(task_, nullptr, WNOHANG), 0);  // still running
  EXPECT_TRUE(std::filesystem::exists(session_));
  EXPECT_TRUE(std::filesystem::exists(shared_memory_[0]));
  EXPECT_FALSE(std::filesystem::is_empty(records_));
}

// A job Slurm requeued keeps its id, and so the session directory and
// /dev/shm names of its earlier run: with that run's record still there (its
// cleanup failed), a later sweep would remove the new step's files and end
// its processes. The new step is refused instead, naming what was left.
TEST_F(CrashedStepsTest, AStepWhoseIdsEarlierRunLeftWhatCouldNotBeRemovedIsRefused) {
  ASSERT_NO_FATAL_FAILURE(WriteDeadDaemonsRecord());
  // The sweep gives up before the record: its cleanup did not happen.
  const CrashedStepSweep sweep =
      SweepBeforeStepStart(records_, job_, "0", std::chrono::steady_clock::now());
  EXPECT_TRUE(sweep.cleaned.empty());
  EXPECT_NE(sweep.start_refused.find(session_.string()), std::string::npos)
      << "start_refused: '" << sweep.start_refused << "'";
  EXPECT_TRUE(std::filesystem::exists(records_ / jobsetup::StepRecordName(job_, "0")))
      << "the record is kept for the next sweep";
  // Another step's start is not refused for it.
  EXPECT_TRUE(SweepBeforeStepStart(records_, "other" + job_, "0", std::chrono::steady_clock::now())
                  .start_refused.empty());
}

// Only the record stayed (its files and processes are gone): nothing of the
// earlier run is left to share, and the step starts.
TEST_F(CrashedStepsTest, AnEarlierRunWhoseFilesAreGoneDoesNotRefuseTheStep) {
  ASSERT_NO_FATAL_FAILURE(WriteDeadDaemonsRecord());
  std::filesystem::remove_all(session_);
  const CrashedStepSweep sweep =
      SweepBeforeStepStart(records_, job_, "0", std::chrono::steady_clock::now());
  EXPECT_TRUE(sweep.start_refused.empty()) << sweep.start_refused;
  EXPECT_FALSE(std::filesystem::exists(records_ / jobsetup::StepRecordName(job_, "0")));
}

// Cleaned, the earlier run's leftovers do not refuse the step that reuses its
// id, and the start's sweep cleans as any sweep does.
TEST_F(CrashedStepsTest, AStepsStartCleansWhatItsIdsEarlierRunLeftAndStarts) {
  StartTask();
  ASSERT_NO_FATAL_FAILURE(WriteDeadDaemonsRecord());
  const CrashedStepSweep sweep = SweepBeforeStepStart(records_, job_, "0");
  EXPECT_TRUE(sweep.problems.empty()) << sweep.problems.front();
  EXPECT_TRUE(sweep.start_refused.empty()) << sweep.start_refused;
  ASSERT_EQ(sweep.cleaned.size(), 1U);
  EXPECT_EQ(::waitpid(task_, nullptr, 0), task_);
  task_ = -1;
  EXPECT_TRUE(NothingLeft());
  EXPECT_FALSE(std::filesystem::exists(records_ / jobsetup::StepRecordName(job_, "0")));
}

TEST_F(CrashedStepsTest, ACorruptRecordIsDroppedAndSaidSo) {
  {
    std::ofstream corrupt(records_ / (job_ + ".0"));
    corrupt << "garbage";
  }
  std::filesystem::permissions(records_ / (job_ + ".0"), std::filesystem::perms::owner_read |
                                                             std::filesystem::perms::owner_write);
  const CrashedStepSweep sweep = CleanUpAfterCrashedSteps(records_);
  ASSERT_EQ(sweep.problems.size(), 1U);
  EXPECT_NE(sweep.problems[0].find("corrupt step record"), std::string::npos) << sweep.problems[0];
  EXPECT_TRUE(std::filesystem::is_empty(records_));
  EXPECT_TRUE(std::filesystem::exists(session_));  // named by nothing: untouched
}

}  // namespace
}  // namespace sray::spank
