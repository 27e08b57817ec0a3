#include "sched/worker_processes.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <future>
#include <string>
#include <vector>

namespace sray::sched {
namespace {

// Sets SIGCHLD's action while it lives, as a driver may have.
class SigchldAction {
 public:
  explicit SigchldAction(sighandler_t action) : before_(::signal(SIGCHLD, action)) {}
  ~SigchldAction() { ::signal(SIGCHLD, before_); }
  SigchldAction(const SigchldAction&) = delete;
  SigchldAction& operator=(const SigchldAction&) = delete;

 private:
  sighandler_t before_;
};

std::vector<std::string> Environment() {
  return {"PATH=/usr/bin:/bin"};
}

TEST(WorkerProcesses, AWorkersEndIsReportedWithItsStatus) {
  std::promise<int> ended;
  auto processes =
      WorkerProcesses::Create([&ended](pid_t, int wait_status) { ended.set_value(wait_status); });
  ASSERT_TRUE(processes.ok()) << processes.status().message();
  auto pid = (*processes)->Spawn("/bin/sh", {"sh", "-c", "exit 3"}, Environment());
  ASSERT_TRUE(pid.ok()) << pid.status().message();
  auto status = ended.get_future();
  ASSERT_EQ(status.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(DescribeWaitStatus(status.get()), "exit status 3");
}

// A driver that ignores SIGCHLD: the system reaps its workers itself, and
// waitpid finds none. The end was never reported (the watcher spun on the
// pidfd), and the destructor waited for ever.
TEST(WorkerProcesses, AWorkersEndIsReportedWhenThisProcessIgnoresSigchld) {
  const SigchldAction ignored(SIG_IGN);
  std::promise<int> ended;
  auto processes =
      WorkerProcesses::Create([&ended](pid_t, int wait_status) { ended.set_value(wait_status); });
  ASSERT_TRUE(processes.ok()) << processes.status().message();
  auto pid = (*processes)->Spawn("/bin/sh", {"sh", "-c", "exit 3"}, Environment());
  ASSERT_TRUE(pid.ok()) << pid.status().message();
  auto status = ended.get_future();
  ASSERT_EQ(status.wait_for(std::chrono::seconds(10)), std::future_status::ready)
      << "the worker's end was not reported";
  const int wait_status = status.get();
  EXPECT_EQ(wait_status, kEndNotKept);
  EXPECT_NE(DescribeWaitStatus(wait_status).find("ignores SIGCHLD"), std::string::npos);
  EXPECT_TRUE((*processes)->Running().empty());
}

}  // namespace
}  // namespace sray::sched
