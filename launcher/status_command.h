#pragma once

// `sray status [JOB]`: the running jobs of this user (from their jobs files,
// ~/.sray/jobs) and, for one of them, its nodes (resources free and total,
// queued tasks, workers, object store) and training runs, asked of the job's
// dashboard API with its token. Where the head's loopback cannot be
// reached (a login node), it runs itself on the head node through Slurm
// (srun --jobid=J --overlap -w HEAD), never by opening the port.

#include <CLI/CLI.hpp>

namespace sray::launcher {

void AddStatusCommand(CLI::App& app);

}  // namespace sray::launcher
