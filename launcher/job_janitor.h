#pragma once

// The local job's janitor: a small process, forked by `sray run` before any
// thread starts, that cleans up after a launcher that could not (kill -9, the
// OOM killer). The launcher tells it, through a pipe only the launcher holds,
// what the job owns as it creates it (each node's setup, the PMIx directory,
// the jobs file) and dismisses it once it has cleaned up itself. When the
// pipe closes without that word, the launcher died: the janitor ends every
// process of the job's nodes (SIGTERM, a grace, SIGKILL), removes their
// session directories and /dev/shm files, the PMIx directory and the jobs
// file, says so on stderr and exits.
//
// It lives in a process group of its own (a Ctrl-C at the terminal is for
// the launcher) and keeps the launcher's blocked signals, so only SIGKILL
// ends it early.
//
// Thread-safety: a JobJanitor belongs to the launcher's main thread.

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <string_view>

#include "common/status.h"
#include "jobsetup/node_setup.h"

namespace sray::launcher {

class JobJanitor {
 public:
  // Forks the janitor. Only while the process has one thread: the child
  // runs ordinary C++ (allocations) after the fork.
  static Result<JobJanitor> Start();
  JobJanitor(JobJanitor&& other) noexcept;
  JobJanitor& operator=(JobJanitor&&) = delete;
  JobJanitor(const JobJanitor&) = delete;
  JobJanitor& operator=(const JobJanitor&) = delete;
  // Closing the pipe without Dismiss is what a dying launcher does: the
  // janitor cleans up.
  ~JobJanitor();

  void WatchNode(const jobsetup::NodeSetup& node);
  void WatchDirectory(const std::filesystem::path& directory);
  void WatchJobsFile(const std::filesystem::path& home, const std::string& job_id,
                     const std::string& step_id);
  // The launcher cleaned up: the janitor exits without touching anything.
  // Waits for it, so it is gone when the launcher exits.
  void Dismiss();

 private:
  JobJanitor(pid_t pid, int pipe) : pid_(pid), pipe_(pipe) {}
  void Send(char kind, std::string_view payload);

  pid_t pid_ = -1;
  int pipe_ = -1;  // write end; close-on-exec, so ranks never hold it
};

// The janitor's side, exposed for tests: reads records from `descriptor`
// until it closes and cleans up unless it was dismissed. Returns whether it
// cleaned up. `launcher` names the launcher in the line it prints.
bool RunJanitor(int descriptor, pid_t launcher);

}  // namespace sray::launcher
