#pragma once

// Starts worker processes (the job's own executable in worker mode) and
// learns of their exit at once through a pidfd each, so a worker that dies
// mid-task is noticed without polling and without reaping children the
// user's program started itself.
//
// Thread-safety: every member may be called from any thread; `on_exit` runs
// on the watcher thread.

#include <sys/types.h>

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"

namespace sray::sched {

// Where a new worker's standard output and error go: these descriptors
// when not -1, else this process's own.
struct SpawnOutput {
  int stdout_fd = -1;
  int stderr_fd = -1;
};

class WorkerProcesses {
 public:
  using ExitHandler = std::function<void(pid_t pid, int wait_status)>;
  static Result<std::unique_ptr<WorkerProcesses>> Create(ExitHandler on_exit);
  // Ends every worker still running (TERM, then KILL after a grace period)
  // and reaps it.
  ~WorkerProcesses();
  WorkerProcesses(const WorkerProcesses&) = delete;
  WorkerProcesses& operator=(const WorkerProcesses&) = delete;

  // `environment` is the whole environment of the new process.
  Result<pid_t> Spawn(const std::string& executable, const std::vector<std::string>& arguments,
                      const std::vector<std::string>& environment,
                      SpawnOutput output = SpawnOutput{});
  void Kill(pid_t pid, int signal_number);
  void StopAll();
  // The workers running now.
  std::vector<pid_t> Running();

 private:
  WorkerProcesses(ExitHandler on_exit, int wake_fd);
  void Watch();

  ExitHandler on_exit_;
  int wake_fd_;
  std::mutex mutex_;
  std::map<pid_t, int> pidfds_;  // running workers
  // Workers that ended before a pidfd could hold them, for the watcher to
  // report (guarded by mutex_).
  std::vector<pid_t> ended_before_watched_;
  std::condition_variable reaped_;  // a worker left pidfds_
  bool stopping_ = false;
  std::thread watcher_;
};

// The wait status given for a worker reaped elsewhere, whose status was not
// kept (never a status waitpid gives).
inline constexpr int kEndNotKept = -1;
// "exit status 3", "signal 9 (Killed)"
std::string DescribeWaitStatus(int wait_status);

}  // namespace sray::sched
