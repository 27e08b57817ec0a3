#pragma once

// `sray run`: a job of N emulated nodes on this machine, with the same roles,
// variables and session directories as `srun --ray-cluster` (through the
// shared job-setup library) and an embedded PMIx server for wire-up.
//
// It spawns every rank, forwards their output (optionally labelled "R: " like
// `srun --label`), ends every rank when one calls PMIx_Abort or sray itself
// is interrupted, gives the others 10 s to notice and exit when a rank
// fails before ending them too, returns the first non-zero exit status, and leaves nothing
// behind: processes, session directories, the nodes' /dev/shm files and PMIx
// files are removed, by the janitor process (job_janitor.h) when the launcher
// itself is killed.
//
// Thread-safety: RunLocalJob owns the process's signal handling while it
// runs; call it once, from the main thread, before any other thread starts.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace sray::launcher {

struct LocalJobRequest {
  std::uint32_t nodes = 1;
  std::uint32_t tasks_per_node = 1;
  std::uint32_t cpus_per_node = 0;    // 0: this machine's CPU count
  std::uint64_t memory_per_node = 0;  // bytes; 0: this machine's memory over the nodes
  bool label = false;
  std::string option_list;  // the same keys as --ray-cluster
  std::optional<std::filesystem::path> admin_config;
  std::vector<std::string> command;
};

struct LocalJobEnd {
  // The first non-zero exit status of any rank, 128 + signal for a rank
  // killed by a signal (which wins over plain exit codes).
  int exit_status = 0;
  // SIGINT, SIGTERM or SIGHUP when the launcher was interrupted and that is
  // why the job ended (exit_status is then 128 + it); 0 otherwise. The
  // caller ends by that signal (EndBySignal): a shell stops its loop or
  // script only when its child died by SIGINT, not when it exited with 130.
  int interrupting_signal = 0;
};

// Returns how the job ended, or an error when it could not start.
Result<LocalJobEnd> RunLocalJob(const LocalJobRequest& request);

// Ends this process by `signal` (its default action) after flushing the
// standard streams; exits with 128 + signal when the signal cannot end it.
[[noreturn]] void EndBySignal(int signal);

}  // namespace sray::launcher
