#include "jobsetup/step_processes.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace sray::jobsetup {
namespace {

// Starts `sh -c SCRIPT` in a session of its own with the step's variables,
// as a task of node NODE would have them. Returns its pid.
pid_t StartStepShell(const std::string& session, std::uint32_t node, const char* script) {
  const pid_t child = ::fork();
  if (child == 0) {
    ::setsid();
    ::setenv("SRAY_SESSION_DIR", session.c_str(), 1);
    ::setenv("SRAY_NODE_ID", std::to_string(node).c_str(), 1);
    ::execl("/bin/sh", "sh", "-c", script, static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return child;
}

// Waits (up to 10 s) until `selector` finds at least `count` processes.
std::size_t WaitForProcesses(const StepProcessSelector& selector, std::size_t count) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  std::size_t found = 0;
  while ((found = FindStepProcesses(selector).size()) < count &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return found;
}

void KillAndReap(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

class StepProcessesTest : public ::testing::Test {
 protected:
  // Never a real session path: only this test's processes carry it.
  const std::string session_ =
      "/nonexistent/sray-step-processes-test-" + std::to_string(::getpid());
};

TEST_F(StepProcessesTest, EndsTheStepsProcessesAndTheChildrenThatEscapedItsTree) {
  const StepProcessSelector selector{
      .uid = ::getuid(), .session_directory = session_, .node_id = 1};
  // The shell leaves a background child behind and becomes a second sleep.
  const pid_t task = StartStepShell(session_, 1, "sleep 60 & exec sleep 61");
  ASSERT_GT(task, 0);
  ASSERT_EQ(WaitForProcesses(selector, 2), 2U);

  auto ended = EndStepProcesses(selector, std::chrono::milliseconds(2000));
  ASSERT_TRUE(ended.ok()) << ended.status().message();
  EXPECT_EQ(*ended, 2U);
  int status = 0;
  ASSERT_EQ(::waitpid(task, &status, 0), task);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
  EXPECT_TRUE(FindStepProcesses(selector).empty());
}

TEST_F(StepProcessesTest, AnotherNodesProcessesAndACleanStepAreLeftAlone) {
  const StepProcessSelector node_one{
      .uid = ::getuid(), .session_directory = session_, .node_id = 1};
  const StepProcessSelector node_two{
      .uid = ::getuid(), .session_directory = session_, .node_id = 2};
  const pid_t other = StartStepShell(session_, 2, "exec sleep 62");
  ASSERT_GT(other, 0);
  ASSERT_EQ(WaitForProcesses(node_two, 1), 1U);

  auto ended = EndStepProcesses(node_one, std::chrono::milliseconds(2000));
  ASSERT_TRUE(ended.ok());
  EXPECT_EQ(*ended, 0U);  // node 1 had nothing left: one scan, nothing sent
  EXPECT_EQ(::kill(other, 0), 0) << "node 2's process was ended with node 1's";

  KillAndReap(other);
}

// Before: after the grace, SIGKILL went to every pid that still had a live
// process, as root under the SPANK plugin. A step process that exited
// during the grace and whose pid was taken by another process meanwhile
// had that process killed in its place. The test makes the pid change
// hands (root writes the kernel's last pid) and checks the newcomer lives.
TEST_F(StepProcessesTest, APidTakenByAnotherProcessDuringTheGraceIsNotKilled) {
  if (::geteuid() != 0) GTEST_SKIP() << "setting the next pid needs root";
  const StepProcessSelector selector{
      .uid = ::getuid(), .session_directory = session_, .node_id = 1};
  // Ignores SIGTERM, then ends on its own during the grace.
  const pid_t task = StartStepShell(session_, 1, "trap '' TERM; exec sleep 0.5");
  ASSERT_GT(task, 0);
  ASSERT_EQ(WaitForProcesses(selector, 1), 1U);
  std::atomic<pid_t> newcomer{0};
  std::thread reuse([&] {
    int status = 0;
    ::waitpid(task, &status, 0);
    // The next fork gets `task`'s pid, unless another process forks first.
    if (FILE* last = std::fopen("/proc/sys/kernel/ns_last_pid", "w")) {
      std::fprintf(last, "%d", task - 1);
      std::fclose(last);
    }
    const pid_t child = ::fork();
    if (child == 0) {
      ::execl("/bin/sleep", "sleep", "10", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    newcomer.store(child);
  });
  auto ended = EndStepProcesses(selector, std::chrono::milliseconds(1500));
  reuse.join();
  ASSERT_TRUE(ended.ok()) << ended.status().message();
  const pid_t other = newcomer.load();
  ASSERT_GT(other, 0);
  const bool took_the_pid = other == task;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a signal sent lands
  int status = 0;
  const bool killed = ::waitpid(other, &status, WNOHANG) == other;
  KillAndReap(other);
  if (!took_the_pid) GTEST_SKIP() << "another process took the pid first; nothing was shown";
  EXPECT_FALSE(killed) << "the process that took the step process's pid was killed";
}

// What EndStepProcesses looks at again for: a process of the user whose
// environment cannot be read as anything (as inside execve) is counted as
// undecided, never taken for the step's.
TEST_F(StepProcessesTest, AProcessWithNoEnvironmentIsUndecidedNotTheSteps) {
  const StepProcessSelector selector{
      .uid = ::getuid(), .session_directory = session_, .node_id = 1};
  const std::size_t before = ScanStepProcesses(selector).undecided;
  const pid_t bare = ::fork();
  if (bare == 0) {
    char* const arguments[] = {const_cast<char*>("sleep"), const_cast<char*>("63"), nullptr};
    char* const no_environment[] = {nullptr};
    ::execve("/bin/sleep", arguments, no_environment);
    ::_exit(127);
  }
  ASSERT_GT(bare, 0);
  // Until the exec, the child still shows this test's environment.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  StepProcessScan scan;
  while ((scan = ScanStepProcesses(selector)).undecided <= before &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // The count is of every process of this user: another test's process
  // inside its own execve may add one for a moment (ctest runs in parallel).
  EXPECT_GE(scan.undecided, before + 1);
  EXPECT_TRUE(scan.matches.empty());
  KillAndReap(bare);
  const auto settled_by = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  std::size_t after = ScanStepProcesses(selector).undecided;
  while (after > before && std::chrono::steady_clock::now() < settled_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    after = ScanStepProcesses(selector).undecided;
  }
  EXPECT_LE(after, before);
}

}  // namespace
}  // namespace sray::jobsetup
