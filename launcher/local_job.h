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

// Returns the job's exit status (the first non-zero one of any rank, 128 +
// signal for a rank killed by a signal, which wins over plain exit codes),
// or an error when it could not start.
Result<int> RunLocalJob(const LocalJobRequest& request);

}  // namespace sray::launcher
