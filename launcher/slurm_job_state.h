#pragma once

// Whether a Slurm job still runs, as its controller says (squeue), for the
// subcommands that list a user's jobs: a jobs file whose driver ran on
// another node outlives the job when that node crashed (nothing ran there
// to remove it), and only Slurm can tell such a job from a running one.
//
// Thread-safety: starts and waits for child processes; call from one
// thread at a time (the subcommands have one).

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace sray::launcher {

enum class SlurmJobState {
  kRuns,     // pending, running, suspended or completing
  kEnded,    // finished, or no longer known to the controller
  kUnknown,  // not a Slurm job id, no squeue, or no answer in time
};

// What squeue's answer means: `states` its lines (squeue -h -o %T), `status`
// its exit status, `errors` its standard error.
SlurmJobState ReadSqueueAnswer(const std::vector<std::string>& states, int status,
                               std::string_view errors);

// Asks `squeue` on PATH about `job_id` (numeric; anything else is kUnknown),
// waiting at most `limit` for each command. `cluster` is the job's cluster
// (SLURM_CLUSTER_NAME, as its jobs file recorded it): an "ended" counts only
// when it names this machine's cluster (`scontrol show config`), since one
// home may serve several clusters whose job numbers overlap.
SlurmJobState AskSlurmAbout(const std::string& job_id, const std::string& cluster,
                            std::chrono::milliseconds limit = std::chrono::seconds(5));

}  // namespace sray::launcher
