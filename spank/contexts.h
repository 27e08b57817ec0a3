#pragma once

// The work behind each SPANK callback, one function per context and event.
// plugin.cc dispatches to these; they return Status and never throw past here.

#include "spank_api.h"

#include <span>
#include <string_view>

#include "common/status.h"

namespace sray::spank {

// Any context: parse plugstack.conf arguments and register --ray-cluster.
Status InitializePlugin(spank_t handle, std::span<const std::string_view> arguments);

// srun, sbatch, salloc: resolve the options now so bad input fails before launch.
Status ValidateRequestedOptions();
// srun, before it launches the tasks: serve the step's wire-up unless
// wireup=pmix (a failure to start falls back to PMIx, with a message).
Status StartWireUpService(spank_t handle);
// srun, at its end.
void StopWireUpService();

// slurmstepd, as root before privileges drop, once per step and node; the
// work itself runs as the job user in a child process.
Status PrepareStepOnNode(spank_t handle);
// slurmstepd, inside each task before exec.
Status ExportTaskEnvironment(spank_t handle);
// slurmstepd, as root, after each task exits: once the node's last task is
// gone, ends the processes it left behind.
Status EndLeftoversAfterLastTask(spank_t handle);
// slurmstepd, as root, when any step ends: a sray step removes what it
// made here; any other user step (of any job) sweeps what steps whose
// slurmstepd died here left, so a node up all along is cleaned by the next
// step of any job, not only by the next sray step. The sweep never fails the
// step.
Status EndStepOnNode(spank_t handle);

// slurmd, as root, when the daemon starts (a node coming back after a
// crash): what steps whose slurmstepd died here left goes now, rather than
// at the next step on the node. `arguments` are the plugin's own from
// plugstack.conf. Its caller never fails slurmd's start over it.
Status SweepCrashedStepsAtDaemonStart(std::span<const std::string_view> arguments);

}  // namespace sray::spank
