#include "train/train_worker.h"

#include <unistd.h>

#include <cstdlib>
#include <string_view>
#include <utility>

#include "common/host_name.h"
#include "sray/actor.h"
#include "sray/internal/actor_process.h"
#include "sray/node.h"
#include "train/worker_session.h"

namespace sray::train::internal {

TrainWorker* TrainWorker::Create() {
  // Its process group, Torch's threads and device state outlive the actor:
  // a training worker's process ends with it, never serves another actor.
  sray::internal::EndProcessWithActor();
  return new TrainWorker();
}

WorkerDescription TrainWorker::Prepare(bool pick_master_port, const std::string& run_directory,
                                       const std::string& storage_token) {
  WorkerDescription description;
  // SRAY_TRAIN_STAGE_CHECKPOINTS=0 sends checkpoints through the driver even
  // where the run directory is shared.
  const char* stage = std::getenv("SRAY_TRAIN_STAGE_CHECKPOINTS");
  description.sees_storage = (stage == nullptr || std::string_view(stage) != "0") &&
                             SeesStorageMarker(run_directory, storage_token);
  description.node_id = sray::CurrentNode().node_id;
  description.hostname = HostName("");
  description.pid = ::getpid();
  if (pick_master_port) description.master_port = FreePortForUserCode();
  return description;
}

WorkerEvent TrainWorker::Run(const WorkerAssignment& assignment, const CheckpointFiles& resume) {
  RunWorkerSession(assignment, resume, reports_);
  return WorkerEvent{};
}

WorkerEvent TrainWorker::NextReport(std::uint64_t stored) {
  reports_.Acknowledge(stored);
  if (auto event = reports_.Take()) return std::move(*event);
  return WorkerEvent{};
}

bool TrainWorker::Acknowledge(std::uint64_t stored) {
  reports_.Acknowledge(stored);
  return true;
}

}  // namespace sray::train::internal

SRAY_REMOTE(sray::train::internal::TrainWorker::Create, &sray::train::internal::TrainWorker::Prepare,
            &sray::train::internal::TrainWorker::Run, &sray::train::internal::TrainWorker::NextReport,
            &sray::train::internal::TrainWorker::Acknowledge);
