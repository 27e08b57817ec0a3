#pragma once

// A training worker: an actor in the run's placement group that hosts one
// rank of the process group. It serves two calls at once: Run (the whole
// loop, long) and NextReport (its next report or checkpoint part, for the
// driver) or Acknowledge.
// Registered with SRAY_REMOTE in libsray_train, so every process of a job
// that links sray::train can host one.

#include <cstdint>
#include <string>

#include "train/checkpoint_storage.h"
#include "train/report_channel.h"
#include "train/worker_protocol.h"

namespace sray::train::internal {

class TrainWorker {
 public:
  static TrainWorker* Create();
  // Where it runs, and whether its node sees the run directory (holding
  // the storage token there); rank 0 (pick_master_port) also picks
  // MASTER_PORT.
  WorkerDescription Prepare(bool pick_master_port, const std::string& run_directory,
                            const std::string& storage_token);
  // Joins the group and runs the loop; answers kFinished when it returns,
  // throws what it threw.
  WorkerEvent Run(const WorkerAssignment& assignment, const CheckpointFiles& resume);
  // The next report (rank 0) or checkpoint part (another rank); kFinished
  // once the loop ended and none is left.
  // `stored`: how many of this worker's reports the driver has stored, which
  // lets the Report calls waiting for that return.
  WorkerEvent NextReport(std::uint64_t stored);
  // The driver has stored `stored` of this worker's reports (a rank other
  // than 0 after its checkpoint part was stored); answers at once.
  bool Acknowledge(std::uint64_t stored);

 private:
  ReportChannel reports_;
};

}  // namespace sray::train::internal
