#pragma once

// Whether the end of a step (of any job) sweeps after crashed steps on its
// node now (spank/remote_context, EndStepOnNode). One sweep at a time per
// node: steps of a job array end together, and each would sweep the same
// records. After a sweep that left something (a tmpdir that hangs, a
// process that does not end), none for kPauseAfterProblems: every step's end
// would otherwise wait up to its budget for the same record. The next sray
// step's start and slurmd's start still try.
//
// The gate is a file in the node's record directory (kStepEndSweepStamp):
// an flock held while a sweep runs, and one byte saying how the last one
// ended, dated by its mtime.
//
// Ownership and thread-safety: a gate owns its descriptor (and the lock);
// one thread uses it.

#include <chrono>
#include <filesystem>
#include <memory>

#include "common/file_descriptor.h"

namespace sray::spank {

class StepEndSweepGate {
 public:
  static constexpr std::chrono::seconds kPauseAfterProblems{60};

  // The gate of the record directory `directory`, when this step's end
  // should sweep now: null while another sweep runs, within the pause, or
  // when the gate cannot be opened (nothing to do then but skip).
  static std::unique_ptr<StepEndSweepGate> Enter(
      const std::filesystem::path& directory,
      std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

  // The gate held by a sray step's start around its own sweep
  // (SweepBeforeStepStart): waits until `give_up_at` for a sweep at another
  // step's end to finish, whatever the pause, and keeps such sweeps out
  // while held. Null at the deadline, or when the gate cannot be opened.
  static std::unique_ptr<StepEndSweepGate> Hold(const std::filesystem::path& directory,
                                                std::chrono::steady_clock::time_point give_up_at);

  // Records how the sweep ended; the lock goes with the gate.
  void Record(bool left_something);
  ~StepEndSweepGate();
  StepEndSweepGate(const StepEndSweepGate&) = delete;
  StepEndSweepGate& operator=(const StepEndSweepGate&) = delete;

 private:
  // The lock stays out of the processes that work as the job user meanwhile
  // (RunAsJobUser): one that hung would hold it on.
  explicit StepEndSweepGate(int descriptor);
  FileDescriptor descriptor_;
};

}  // namespace sray::spank
