#include "train/train_worker.h"

#include <unistd.h>

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

WorkerDescription TrainWorker::Prepare(bool pick_master_port) {
  WorkerDescription description;
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
