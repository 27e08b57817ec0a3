#include "job_user_process.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <csignal>
#include <stdexcept>
#include <string>

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

TEST(RunAsJobUser, AUserItCannotBecomeIsRefusedByName) {
  if (getuid() == 0) GTEST_SKIP() << "root may become any user";
  JobUser root{.uid = 0, .gid = 0, .groups = {}};
  auto answer = RunAsJobUser(root, [] { return std::string("became root"); });
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(answer.status().message().find("cannot become uid 0"), std::string::npos);
}

}  // namespace
}  // namespace sray::spank
