#pragma once

// One training worker's run of the loop: joins the process group, sets the
// torchrun variables, restores the checkpoint, makes GetContext, Report,
// GetCheckpoint, PrepareModel and DistributedSampler work for the loop, and
// runs it. The LibTorch side of the worker; the actor around it
// (train_worker.cc) knows nothing of LibTorch.
//
// A worker process runs one session at a time (the trainer starts a fresh
// process for every attempt).

#include <cstdint>
#include <string>

#include "train/checkpoint_storage.h"
#include "train/report_channel.h"
#include "train/worker_protocol.h"

namespace sray::train::internal {

// A port that was free on this host a moment ago (MASTER_PORT).
std::uint16_t FreePortForUserCode();

// Removes the checkpoint copies restored for workers in `directory` (a node's
// session directory) whose processes have ended; a killed worker never
// removes its own. Run by every worker as it starts.
void RemoveRestoreCopiesOfEndedWorkers(const std::string& directory);

// Runs the loop to its end; throws what it threw (or a collective's error).
// Rank 0's reports go to `reports`, which is closed when the loop ends.
void RunWorkerSession(const WorkerAssignment& assignment, const CheckpointFiles& resume,
                      ReportChannel& reports);

}  // namespace sray::train::internal
