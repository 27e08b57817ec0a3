#include "sched/worker_processes.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <chrono>
#include <csignal>
#include <future>
#include <optional>
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

// Starts a worker that exits with status 3 and returns the wait status its
// end was reported with, or nothing within 10 s; checks that it is no longer
// counted as running.
std::optional<int> ReportedEndOfAWorker() {
  std::promise<int> ended;
  auto processes =
      WorkerProcesses::Create([&ended](pid_t, int wait_status) { ended.set_value(wait_status); });
  EXPECT_TRUE(processes.ok()) << processes.status().message();
  if (!processes.ok()) return std::nullopt;
  auto pid = (*processes)->Spawn("/bin/sh", {"sh", "-c", "exit 3"}, {"PATH=/usr/bin:/bin"});
  EXPECT_TRUE(pid.ok()) << pid.status().message();
  if (!pid.ok()) return std::nullopt;
  auto status = ended.get_future();
  if (status.wait_for(std::chrono::seconds(10)) != std::future_status::ready) return std::nullopt;
  EXPECT_TRUE((*processes)->Running().empty());
  return status.get();
}

TEST(WorkerProcesses, AWorkersEndIsReportedWithItsStatus) {
  const auto wait_status = ReportedEndOfAWorker();
  ASSERT_TRUE(wait_status) << "the worker's end was not reported";
  EXPECT_EQ(DescribeWaitStatus(*wait_status), "exit status 3");
}

// A driver that ignores SIGCHLD: the system reaps its workers itself, and
// waitpid finds none. The end was never reported (the watcher spun on the
// pidfd), and the destructor waited for ever.
TEST(WorkerProcesses, AWorkersEndIsReportedWhenThisProcessIgnoresSigchld) {
  const SigchldAction ignored(SIG_IGN);
  const auto wait_status = ReportedEndOfAWorker();
  ASSERT_TRUE(wait_status) << "the worker's end was not reported";
  EXPECT_EQ(*wait_status, kEndNotKept);
  EXPECT_NE(DescribeWaitStatus(*wait_status).find("ignores SIGCHLD"), std::string::npos);
}

}  // namespace
}  // namespace sray::sched
