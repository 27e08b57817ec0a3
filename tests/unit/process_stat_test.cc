#include "common/process_stat.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <chrono>
#include <thread>

namespace sray {
namespace {

// A real line of /proc/PID/stat (fields 1-22 and a few more).
constexpr std::string_view kSleepLine =
    "4242 (sleep) S 1 4242 4242 0 -1 4194560 101 0 0 0 0 0 0 0 20 0 1 0 "
    "123456 5668864 224 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";

TEST(ProcessStat, ReadsStateFlagsAndStartTimeOfALine) {
  const std::optional<ProcessStat> stat = ParseProcessStat(kSleepLine);
  ASSERT_TRUE(stat.has_value());
  EXPECT_EQ(stat->state, 'S');
  EXPECT_EQ(stat->flags, 4194560UL);
  EXPECT_EQ(stat->start_time, 123456U);
}

// A program may name itself anything, parentheses and spaces included: the
// fields are counted from the last ')'.
TEST(ProcessStat, ACommandWithSpacesAndParenthesesDoesNotShiftTheFields) {
  const std::optional<ProcessStat> stat =
      ParseProcessStat("77 (a) b (c) T) t 1 77 77 0 -1 2097152 0 0 0 0 0 0 0 0 20 0 1 0 99 0 0\n");
  ASSERT_TRUE(stat.has_value());
  EXPECT_EQ(stat->state, 't');
  EXPECT_EQ(stat->flags, 2097152UL);
  EXPECT_EQ(stat->start_time, 99U);
}

TEST(ProcessStat, ALineCutShortOrGarbledIsRefused) {
  EXPECT_FALSE(ParseProcessStat(""));
  EXPECT_FALSE(ParseProcessStat("4242 sleep S 1"));
  EXPECT_FALSE(ParseProcessStat("4242 (sleep) S 1 4242 4242 0 -1 4194560 101 0\n"));
  EXPECT_FALSE(
      ParseProcessStat("4242 (sleep) S 1 4242 4242 0 -1 flags 0 0 0 0 0 0 0 0 20 0 1 0 1 0"));
  EXPECT_FALSE(ParseProcessStat("4242 (sleep) Sx 1 4242 4242 0 -1 1 0 0 0 0 0 0 0 0 20 0 1 0 1 0"));
}

TEST(ProcessStat, ALineThatEndsAtTheStartTimeIsRead) {
  for (const std::string_view line : {"9 (x) S 1 9 9 0 -1 64 0 0 0 0 0 0 0 0 20 0 1 0 777",
                                      "9 (x) S 1 9 9 0 -1 64 0 0 0 0 0 0 0 0 20 0 1 0 777\n"}) {
    const std::optional<ProcessStat> stat = ParseProcessStat(line);
    ASSERT_TRUE(stat.has_value()) << line;
    EXPECT_EQ(stat->flags, 64UL);
    EXPECT_EQ(stat->start_time, 777U);
  }
}

// A thread's own file, as the transport reads it for every thread of a
// process that maps its queues: the state of that thread.
TEST(ProcessStat, AThreadsStatFileIsReadByItsPath) {
  const std::string path =
      "/proc/self/task/" + std::to_string(static_cast<pid_t>(syscall(SYS_gettid))) + "/stat";
  const std::optional<ProcessStat> stat = ReadProcessStat(path);
  ASSERT_TRUE(stat.has_value());
  EXPECT_EQ(stat->state, 'R');
  EXPECT_FALSE(IsPausedState(stat->state));
  EXPECT_FALSE(ReadProcessStat("/proc/self/task/0/stat").has_value());
}

TEST(ProcessStat, ThisProcessRunsAndHasAStartTime) {
  const std::optional<ProcessStat> stat = ReadProcessStat(getpid());
  ASSERT_TRUE(stat.has_value());
  EXPECT_EQ(stat->state, 'R');
  EXPECT_GT(stat->start_time, 0U);
  EXPECT_EQ(ProcessStartTime(getpid()), stat->start_time);
}

TEST(ProcessStat, AStoppedChildIsPausedAndAReapedOneIsGone) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  ASSERT_EQ(kill(child, SIGSTOP), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, WUNTRACED), child);
  const std::optional<ProcessStat> stopped = ReadProcessStat(child);
  ASSERT_TRUE(stopped.has_value());
  EXPECT_TRUE(IsPausedState(stopped->state)) << "state " << stopped->state;
  EXPECT_GT(ProcessStartTime(child), 0U);

  ASSERT_EQ(kill(child, SIGKILL), 0);
  // Killed but not yet reaped (WNOWAIT waits for the end and leaves the
  // child): a zombie, which no longer runs.
  siginfo_t ended{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(child), &ended, WEXITED | WNOWAIT), 0);
  const std::optional<ProcessStat> zombie = ReadProcessStat(child);
  ASSERT_TRUE(zombie.has_value());
  EXPECT_EQ(zombie->state, 'Z');
  EXPECT_EQ(ProcessStartTime(child), 0U);
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_FALSE(ReadProcessStat(child).has_value());
  EXPECT_FALSE(IsPausedState('S'));
  EXPECT_FALSE(IsPausedState('R'));
}

}  // namespace
}  // namespace sray
