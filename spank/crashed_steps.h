#pragma once

// The sweep after steps whose slurmstepd died on this node (a crash and
// reboot, an OOM kill of the daemon): their records (jobsetup/step_record.h)
// outlive them, and slurmd's start on the node (as it comes back), the
// next sray step's start there and the end of any step there (of any job)
// end the processes they left, and remove their session directories and
// /dev/shm files. Without it those files stay until the node
// reboots, taking memory from every later job.
//
// Thread-safety: call from one thread at a time (a slurmstepd's SPANK
// callbacks); runs as root and forks to act as each step's user.

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace sray::spank {

struct CrashedStepSweep {
  // Steps whose leftovers are now gone, named "<job>.<step> (node N)".
  std::vector<std::string> cleaned;
  std::size_t processes_ended = 0;
  // What could not be done; a step that failed keeps its record for the
  // next sweep.
  std::vector<std::string> problems;
};

// Gives up, saying so in `problems`, at `give_up_at` (each step takes up to
// about 11 s: slurmd's start must not wait for many of them); what is left
// stays for the next sweep.
CrashedStepSweep CleanUpAfterCrashedSteps(const std::filesystem::path& record_directory,
                                          std::chrono::steady_clock::time_point give_up_at =
                                              std::chrono::steady_clock::time_point::max());

// The sweep at a sray step's start, before its node is prepared. Under the
// node's sweep gate (StepEndSweepGate::Hold): a sweep at another step's end
// must not work from records it read before this step took over its paths.
// Then a record of this step's own id is forgotten, cleaned or not: a job
// Slurm requeued keeps its id, and with it the session directory and /dev/shm
// names of its earlier run, so a later sweep would remove the new step's
// files and end its processes. This step's own end removes what is there.
CrashedStepSweep SweepBeforeStepStart(const std::filesystem::path& record_directory,
                                      std::string_view job_id, std::string_view step_id,
                                      std::chrono::steady_clock::time_point give_up_at =
                                          std::chrono::steady_clock::time_point::max());

}  // namespace sray::spank
