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
  // SweepBeforeStepStart only: why the starting step must not start (what
  // an earlier run of its own id left here could not be removed); empty
  // when it may.
  std::string start_refused;
};

// Gives up, saying so in `problems`, at `give_up_at` (each step takes up to
// about 11 s: slurmd's start must not wait for many of them); what is left
// stays for the next sweep.
CrashedStepSweep CleanUpAfterCrashedSteps(const std::filesystem::path& record_directory,
                                          std::chrono::steady_clock::time_point give_up_at =
                                              std::chrono::steady_clock::time_point::max());

// The sweep at a sray step's start, before its node is prepared, under the
// node's sweep gate (StepEndSweepGate::Hold). A job Slurm requeued keeps its
// id, and with it the session directory and /dev/shm names of its earlier
// run: a sweep at another step's end that read that run's record before
// this step started would remove the new step's files and end its
// processes, so the start waits for such a sweep. A record of this step's own
// id that is still there after the sweep (its cleanup failed) refuses the
// start (start_refused): the step would share what that run left.
CrashedStepSweep SweepBeforeStepStart(const std::filesystem::path& record_directory,
                                      std::string_view job_id, std::string_view step_id,
                                      std::chrono::steady_clock::time_point give_up_at =
                                          std::chrono::steady_clock::time_point::max());

}  // namespace sray::spank
