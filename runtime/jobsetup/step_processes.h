#pragma once

// Finds and ends the processes of one step on one node, including those that
// escaped the task's process tree (a daemonised child, `setsid`, `nohup ... &`).
// Slurm's proctrack/linuxproc and proctrack/pgid lose such processes; cgroups
// do not, but not every site (or the emulated test cluster) uses them.
//
// A process belongs to the step when it runs as the job user and its
// environment carries the step's SRAY_SESSION_DIR and SRAY_NODE_ID, which
// every task receives and children inherit. The node id matters where several
// emulated nodes share one machine and one session path.
//
// Thread-safety: stateless; reads /proc.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/status.h"

namespace sray::jobsetup {

// How long a step's leftovers get to exit on SIGTERM before SIGKILL: short,
// since their step is over (and srun may wait for their output pipes).
inline constexpr std::chrono::milliseconds kLeftoverGrace{1000};

struct StepProcessSelector {
  uid_t uid = 0;
  std::filesystem::path session_directory;
  std::uint32_t node_id = 0;
};

// The environment entries ("NAME=value") that make a process one of the
// selected step's: a process the step's setup starts itself (the conda tool
// staging its environment) carries them, so that the step's end, or the
// janitor of a killed `sray run`, ends it too.
std::vector<std::string> StepProcessMarkers(const std::filesystem::path& session_directory,
                                            std::uint32_t node_id);

// One look at /proc for `selector`: the step's processes, never the caller,
// and how many live processes of the user show no environment at all. Those
// may be inside execve (for a moment a new program's environment is not
// there yet), so they may still turn out to be the step's: EndStepProcesses
// looks again when there are any.
struct StepProcessScan {
  std::vector<pid_t> matches;
  std::size_t undecided = 0;
};
StepProcessScan ScanStepProcesses(const StepProcessSelector& selector);
// Process ids that match `selector`, never including the caller.
std::vector<pid_t> FindStepProcesses(const StepProcessSelector& selector);

// Sends SIGTERM to every match, waits up to `grace`, then SIGKILLs the rest.
// Returns how many processes were found.
Result<std::size_t> EndStepProcesses(const StepProcessSelector& selector,
                                     std::chrono::milliseconds grace);
// The same for several nodes at once: one grace for all of them.
Result<std::size_t> EndStepProcesses(const std::vector<StepProcessSelector>& selectors,
                                     std::chrono::milliseconds grace);

}  // namespace sray::jobsetup
