#pragma once

// Whether a Slurm job still runs, as its controller says (squeue), for the
// subcommands that list a user's jobs: a jobs file whose driver ran on
// another node outlives the job when that node crashed (nothing ran there
// to remove it), and only Slurm can tell such a job from a running one.
//
// Thread-safety: starts and waits for child processes; call from one
// thread at a time (the subcommands have one).

#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace sray::launcher {

enum class SlurmJobState {
  kRuns,     // pending, running, suspended or completing
  kEnded,    // finished, or no longer known to the controller
  kUnknown,  // not a Slurm job id, no squeue, or no answer in time
};

// What squeue's answer to `--jobs=ID,... --format="%A %T"` says of each job
// in `asked`: `lines` its output, `status` its exit status, `errors` its
// standard error. A job not listed has ended (squeue lists only jobs that
// have not); asked alone, a job the controller forgot (past MinJobAge) is
// an error, "Invalid job id", which says the same; any other failure (the
// controller unreachable) says nothing of any job.
std::map<std::string, SlurmJobState> ReadSqueueAnswer(const std::vector<std::string>& asked,
                                                      const std::vector<std::string>& lines,
                                                      int status, std::string_view errors);

// Asks `squeue` on PATH about `job_ids` at once (one command for all;
// anything not numeric is kUnknown), waiting at most `limit`.
std::map<std::string, SlurmJobState> AskSlurmAbout(
    const std::vector<std::string>& job_ids,
    std::chrono::milliseconds limit = std::chrono::seconds(5));

// This machine's Slurm cluster (`scontrol show config`'s ClusterName);
// empty when unknown. An "ended" counts only for a job of this cluster: one
// home may serve several clusters whose job numbers overlap.
std::string LocalSlurmClusterName(std::chrono::milliseconds limit = std::chrono::seconds(5));

}  // namespace sray::launcher
