#pragma once

// What a node's workers print. Each worker's standard output and error go
// to pipes this class reads on a thread of its own: every line is appended
// to the worker's log file in the session directory (logs/worker-RANK.log,
// common/worker_log_files; kept under a size limit by moving it to .1 once,
// so the newest lines are always there), and, unless log_to_driver=false, written to the node
// manager's own output with a prefix naming the node, worker and pid, which
// is where a job's output is gathered (srun, sray run).
//
// A worker that crashes on a signal prints UCX's report (its error handler,
// UCX_HANDLE_ERRORS=bt by default: "Caught signal", then a backtrace of some
// 20 lines) on stderr, on every retry of the task. That report goes to the
// worker's log only; the job's output gets one sray line naming the worker,
// the signal and the log that holds the backtrace.
//
// Thread-safety: Open may be called from any thread; lines are handled on
// the reader thread.

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/status.h"

namespace sray::core {

class WorkerOutput {
 public:
  struct Options {
    std::filesystem::path directory;  // created if missing
    std::uint32_t node_id = 0;
    bool to_driver = true;
    std::uint64_t file_limit = std::uint64_t{8} << 20;
    // Where prefixed lines go (the manager's own output by default).
    int driver_stdout = 1;
    int driver_stderr = 2;
    // Where the logs are copied when the step ends (log_dir=); empty: they
    // go with the session directory, which a crash message then says.
    std::filesystem::path kept_in;
  };
  static Result<std::unique_ptr<WorkerOutput>> Start(Options options);
  // Reads what is still in the pipes, then stops.
  ~WorkerOutput();
  WorkerOutput(const WorkerOutput&) = delete;
  WorkerOutput& operator=(const WorkerOutput&) = delete;

  // The write ends for a new worker's standard output and error: give them
  // to the spawn, then Close them here (the reader sees EOF when the worker
  // and its children are gone).
  struct Pipes {
    int stdout_fd = -1;
    int stderr_fd = -1;
  };
  Result<Pipes> Open(std::uint32_t rank);
  // After the spawn (or its failure): the write ends, and the pid for the
  // prefix (0 when the spawn failed).
  void Started(std::uint32_t rank, const Pipes& pipes, pid_t pid);
  [[nodiscard]] std::filesystem::path LogPath(std::uint32_t rank) const;

 private:
  explicit WorkerOutput(Options options, int wake_fd);
  struct Stream {
    std::uint32_t rank = 0;
    bool is_stderr = false;
    std::string partial;  // a line not yet ended
    // Inside UCX's crash report: its lines go to the log file only.
    bool in_crash_report = false;
    bool crash_backtrace_started = false;
    int crash_report_lines = 0;  // a report that never ends hides no more than a few
  };
  struct Worker {
    pid_t pid = 0;
    // Its streams are read only from Started on: a line read before would
    // carry pid 0 in its prefix (the output waits in the pipe till then).
    bool started = false;
    int file = -1;
    std::uint64_t written = 0;
    int open_streams = 2;
  };
  void Read();
  // Reader thread only; the last two under mutex_.
  void HandleRead(int descriptor, std::string_view data, bool ended);
  void Line(Stream& stream, std::string_view line);
  // Whether the line belongs to UCX's crash report (and so stays out of the
  // job's output); the report's first line queues sray's one-line cause.
  bool KeepInLogOnly(Stream& stream, const Worker& worker, std::string_view line);
  void WriteToFile(Worker& worker, std::uint32_t rank, std::string_view text);

  const Options options_;
  const int wake_fd_;
  std::mutex mutex_;
  std::map<int, Stream> streams_;            // read end -> stream; guarded by mutex_
  std::map<std::uint32_t, Worker> workers_;  // guarded by mutex_
  std::atomic<bool> stopping_{false};
  // Prefixed lines for the job's output, written by the reader thread after
  // it released mutex_ (reader thread only).
  std::vector<std::pair<int, std::string>> driver_lines_;
  std::thread reader_;
};

}  // namespace sray::core
