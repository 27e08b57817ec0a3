#include "job_user_process.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace sray::spank {
namespace {

// The calling user: the only one a test not running as root may become.
JobUser Me() {
  JobUser user{.uid = getuid(), .gid = getgid(), .groups = {}};
  const int count = getgroups(0, nullptr);
  user.groups.resize(static_cast<std::size_t>(count));
  EXPECT_EQ(getgroups(count, user.groups.data()), count);
  return user;
}

TEST(RunAsJobUser, ReturnsWhatTheWorkAnsweredInTheChild) {
  const pid_t parent = getpid();
  auto answer = RunAsJobUser(Me(), [parent] {
    return getpid() == parent ? std::string("ran in the parent") : std::string(70000, 'x');
  });
  ASSERT_TRUE(answer.ok()) << answer.status().message();
  EXPECT_EQ(*answer, std::string(70000, 'x'));  // larger than a pipe's buffer
}

TEST(RunAsJobUser, TheChildRunsAsTheUser) {
  auto answer = RunAsJobUser(Me(), [] { return std::to_string(geteuid()); });
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(*answer, std::to_string(getuid()));
}

TEST(RunAsJobUser, WorkPastItsDeadlineIsKilledAndSaidSo) {
  const auto started = std::chrono::steady_clock::now();
  auto answer = RunAsJobUser(
      Me(),
      [] {
        ::raise(SIGSTOP);  // as a user could stop it
        return std::string("never");
      },
      std::chrono::milliseconds(300));
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  ASSERT_FALSE(answer.ok());
  EXPECT_NE(answer.status().message().find("did not finish within 300 ms"), std::string::npos)
      << answer.status().message();
}

TEST(RunAsJobUser, WorkThatThrowsIsReportedNotLost) {
  auto answer = RunAsJobUser(Me(), []() -> std::string { throw std::runtime_error("boom"); });
  ASSERT_FALSE(answer.ok());
  EXPECT_NE(answer.status().message().find("failed unexpectedly"), std::string::npos);
}

TEST(RunAsJobUser, AChildThatDiesIsReportedWithItsSignal) {
  auto answer = RunAsJobUser(Me(), []() -> std::string {
    raise(SIGKILL);
    return "unreachable";
  });
  ASSERT_FALSE(answer.ok());
  EXPECT_NE(answer.status().message().find("died of signal 9"), std::string::npos)
      << answer.status().message();
}

// The step's node is recorded from what the work tells while it still
// runs (a slurmstepd that dies while the environment is staged).
TEST(RunAsJobUser, WhatTheWorkToldIsHeardInOrderBeforeTheAnswer) {
  const std::string large(200'000, 'x');  // more than a pipe holds
  std::vector<std::string> heard;
  auto answer = RunAsJobUser(
      Me(),
      [&large](const TellCaller& tell) {
        tell("first");
        tell(large);
        tell("");
        tell("last");
        return std::string("answer");
      },
      std::nullopt, [&heard](const std::string& text) { heard.push_back(text); });
  ASSERT_TRUE(answer.ok()) << answer.status().message();
  EXPECT_EQ(*answer, "answer");
  ASSERT_EQ(heard.size(), 4u);
  EXPECT_EQ(heard[0], "first");
  EXPECT_EQ(heard[1], large);
  EXPECT_EQ(heard[2], "");
  EXPECT_EQ(heard[3], "last");
}

TEST(RunAsJobUser, WhatWasToldIsHeardEvenWhenTheWorkThenDies) {
  std::vector<std::string> heard;
  auto answer = RunAsJobUser(
      Me(),
      [](const TellCaller& tell) -> std::string {
        tell("created");
        raise(SIGKILL);
        return "unreachable";
      },
      std::nullopt, [&heard](const std::string& text) { heard.push_back(text); });
  ASSERT_FALSE(answer.ok());
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_EQ(heard[0], "created");
}

TEST(RunAsJobUser, WhatWasToldIsHeardWhenTheWorkPassesItsDeadline) {
  std::vector<std::string> heard;
  auto answer = RunAsJobUser(
      Me(),
      [](const TellCaller& tell) -> std::string {
        tell("created");
        std::this_thread::sleep_for(std::chrono::seconds(30));
        return "too late";
      },
      std::chrono::milliseconds(300), [&heard](const std::string& text) { heard.push_back(text); });
  ASSERT_FALSE(answer.ok());
  EXPECT_NE(answer.status().message().find("did not finish within 300 ms"), std::string::npos)
      << answer.status().message();
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_EQ(heard[0], "created");
}

// 0: refused as expected; 1: not refused, or refused with another message.
int RefusalOfRoot() {
  JobUser root{.uid = 0, .gid = 0, .groups = {}};
  auto answer = RunAsJobUser(root, [] { return std::string("became root"); });
  return !answer.ok() && answer.status().code() == StatusCode::kPermissionDenied &&
                 answer.status().message().find("cannot become uid 0") != std::string::npos
             ? 0
             : 1;
}

TEST(RunAsJobUser, AUserItCannotBecomeIsRefusedByName) {
  if (getuid() != 0) {
    EXPECT_EQ(RefusalOfRoot(), 0);
    return;
  }
  // Root may become anyone (and CI runs as root): check from a child that
  // has become "nobody" first.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    _exit(RefusalOfRoot());
  }
  int wait_status = 0;
  ASSERT_EQ(waitpid(child, &wait_status, 0), child);
  ASSERT_TRUE(WIFEXITED(wait_status));
  EXPECT_EQ(WEXITSTATUS(wait_status), 0) << "2: could not drop privileges, 1: not refused";
}

}  // namespace
}  // namespace sray::spank
