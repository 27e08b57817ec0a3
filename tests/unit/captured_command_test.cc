#include "common/captured_command.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>

namespace sray {
namespace {

CapturedCommand Bash(const std::string& script) {
  return {.argv = {"/bin/bash", "-c", script},
          .environment = std::nullopt,
          .capture_errors = true,
          .no_input = true,
          .limit = std::chrono::seconds(10),
          .most_bytes = 1 << 20};
}

TEST(CapturedCommand, KeepsBothStreamsAndTheExitStatus) {
  const auto ran = RunCapturing(Bash("echo out; echo err >&2; exit 3"));
  ASSERT_TRUE(ran.ok()) << ran.status().message();
  EXPECT_FALSE(ran->cut_short);
  EXPECT_EQ(ran->output, "out\n");
  EXPECT_EQ(ran->errors, "err\n");
  EXPECT_TRUE(ran->ExitedWith(3));
  EXPECT_EQ(ran->How(), "exit status 3");
}

TEST(CapturedCommand, RunsWithTheEnvironmentItIsGivenAndNothingOnItsInput) {
  CapturedCommand command = Bash("echo \"$ONLY_THIS\" \"${HOME:-none}\"; cat");
  command.environment = std::vector<std::string>{"ONLY_THIS=yes"};
  const auto ran = RunCapturing(command);
  ASSERT_TRUE(ran.ok());
  EXPECT_EQ(ran->output, "yes none\n") << "cat read /dev/null";
}

// squeue that hangs (a controller that never answers) must not hang the tool.
TEST(CapturedCommand, ACommandPastItsLimitIsKilledAndSaidAsSuch) {
  CapturedCommand command = Bash("echo started; exec sleep 30");
  command.limit = std::chrono::milliseconds(300);
  const auto started = std::chrono::steady_clock::now();
  const auto ran = RunCapturing(command);
  ASSERT_TRUE(ran.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  EXPECT_TRUE(ran->timed_out);
  EXPECT_FALSE(ran->ExitedWith(0));
  EXPECT_EQ(ran->How(), "ran past its time limit");
  EXPECT_EQ(ran->output, "started\n");
}

TEST(CapturedCommand, KeepsAtMostItsBoundAndStillReadsToTheEnd) {
  CapturedCommand command = Bash("head -c 300000 /dev/zero; echo done >&2");
  command.most_bytes = 1000;
  const auto ran = RunCapturing(command);
  ASSERT_TRUE(ran.ok());
  EXPECT_EQ(ran->output.size(), 1000U);
  EXPECT_TRUE(ran->cut_short) << "said, so that a cut list is not read as whole";
  EXPECT_EQ(ran->errors, "done\n");
  EXPECT_TRUE(ran->ExitedWith(0)) << "never blocked on a full pipe";
}

// `sray run` blocks INT and TERM for its signalfd: a command that inherited
// that mask would not end on Ctrl-C or kill. (TERM here: a test run as a
// script's background job has INT ignored, which the command keeps.)
TEST(CapturedCommand, TheCommandRunsWithNoSignalBlocked) {
  sigset_t blocked;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGINT);
  sigaddset(&blocked, SIGTERM);
  sigset_t before;
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &blocked, &before), 0);
  const auto ran = RunCapturing(Bash("grep '^SigBlk' /proc/self/status; kill -TERM $$; sleep 5"));
  pthread_sigmask(SIG_SETMASK, &before, nullptr);
  ASSERT_TRUE(ran.ok());
  EXPECT_EQ(ran->output, "SigBlk:\t0000000000000000\n");
  EXPECT_EQ(ran->How(), "killed by signal 15 (Terminated)");
}

// A command that closes its output and then hangs: the limit still holds
// (the wait for its end was unbounded).
TEST(CapturedCommand, ACommandThatClosesItsOutputThenHangsIsKilledAtItsLimit) {
  CapturedCommand command = Bash("echo said; exec >&- 2>&-; exec sleep 30");
  command.limit = std::chrono::seconds(2);  // time for bash to say it first
  const auto started = std::chrono::steady_clock::now();
  const auto ran = RunCapturing(command);
  ASSERT_TRUE(ran.ok()) << ran.status().message();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
  EXPECT_TRUE(ran->timed_out);
  EXPECT_EQ(ran->output, "said\n");
}

TEST(CapturedCommand, AProgramThatCannotStartIsAnError) {
  const auto ran = RunCapturing({.argv = {"/nonexistent/program"},
                                 .environment = std::nullopt,
                                 .capture_errors = true,
                                 .no_input = true,
                                 .limit = std::nullopt,
                                 .most_bytes = 1024});
  ASSERT_FALSE(ran.ok());
  EXPECT_NE(ran.status().message().find("/nonexistent/program"), std::string::npos);
}

}  // namespace
}  // namespace sray
