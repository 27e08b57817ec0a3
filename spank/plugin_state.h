#pragma once

// State the plugin carries between SPANK callbacks of one process (srun,
// sbatch or one slurmstepd). Slurm calls the callbacks one after another from
// one thread, and task_init runs in a forked child that inherits a copy, so a
// single process-wide instance without locking is correct. (The rendezvous
// server's own thread touches only the server.)

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "jobsetup/node_setup.h"
#include "plugstack_arguments.h"
#include "wire/rendezvous_server.h"

namespace sray::spank {

struct PluginState {
  PlugstackArguments plugstack;
  // --ray-cluster was given (possibly with an empty value).
  bool cluster_requested = false;
  std::string option_list;
  // The resolved wireup option (srun only).
  std::string wireup;
  // srun only: the step's wire-up service, from local_user_init to exit.
  std::unique_ptr<wire::rendezvous::RendezvousServer> rendezvous;
  // Failures of preparing the node, kept for task_init, where they reach the
  // task's stderr and fail it.
  Status deferred_error;
  std::optional<jobsetup::NodeSetup> node_setup;
  // Where this node's step records are (jobsetup/step_record.h); empty when
  // it could not be prepared, and then this step has no record.
  std::filesystem::path record_directory;
  uid_t job_uid = 0;
  gid_t job_gid = 0;
  std::vector<gid_t> job_groups;
  // Tasks of this node whose exit slurmstepd has reported (task_exit).
  std::uint32_t exited_tasks = 0;
};

PluginState& State();

}  // namespace sray::spank
