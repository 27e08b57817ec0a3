#pragma once

// The job-setup library's entry point: what one node of a step needs before
// its tasks start, identical for the SPANK plugin and `sray run`. A front end
// gathers the facts its launcher knows (ids, node rank, head host, options),
// calls PrepareNode as the job user, exports the variables to every task, and
// calls TeardownNode when the step ends.
//
// Thread-safety: no shared state; a NodeSetup is owned by its front end.

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "common/status.h"
#include "jobsetup/resolved_options.h"
#include "jobsetup/task_environment.h"

namespace sray::jobsetup {

struct NodeSetup;

struct NodeSetupRequest {
  std::string job_id;
  std::string step_id;
  std::uint32_t node_id = 0;
  std::uint32_t num_nodes = 0;
  std::uint32_t node_cpus = 0;
  std::uint64_t node_memory_bytes = 0;
  std::string head_host;
  uid_t uid = 0;
  ResolvedOptions options;
  // True where several emulated nodes share one /tmp (`sray run`).
  bool session_directory_per_node = false;
  // Nodes of the step on this machine, sharing its /dev/shm (all of them
  // under `sray run`): the object store's size is checked against their
  // share before any task starts.
  std::uint32_t nodes_on_this_machine = 1;
  // The tasks' own variables (PATH, HOME, ...), which activating the step's
  // conda environment builds on; null: none.
  std::function<std::optional<std::string>(const std::string& name)> task_variable;
  // Lines on the progress of staging the step's environment; null: none.
  std::function<void(const std::string& line)> progress;
  // Whether the user interrupted the launch, asked while staging; null: never.
  std::function<bool()> interrupted;
  // Called once the node's session directory and shared-memory directory
  // exist, before its environment is staged (which may take minutes): what
  // must clean up after a killed launcher learns of them here. Null: none.
  std::function<void(const NodeSetup& created)> created;
};

struct NodeSetup {
  TaskEnvironment environment;
  std::filesystem::path session_directory;
};

// The file in the session directory holding the lock of the step's conda
// environment on this node: the runtime compares nodes' locks through PMIx.
inline constexpr const char* kEnvironmentLockFile = "environment.lock";
// One line saying how the step's environment was made ready on this node.
inline constexpr const char* kEnvironmentNoteFile = "environment.note";
// Written in node 0's session directory by the head once every node
// registered and it handles a node's loss: from then on `sray run` lets the
// job go on when a non-head rank is killed (before, or for programs that are
// not sray clusters, such a death ends the job).
inline constexpr const char* kHandlesNodeLossFile = "head-handles-node-loss";

// Validates the request and creates the session directory. Run as the job
// user, so the directory belongs to it.
Result<NodeSetup> PrepareNode(const NodeSetupRequest& request);

// This machine's physical memory in bytes: what a node offers when the
// launcher gives no figure (a Slurm job that asked for no memory).
std::uint64_t MachineMemoryBytes();

// Removes what PrepareNode created and whatever the step left in the node's
// /dev/shm (node_shared_memory.h); safe to call twice.
Status TeardownNode(const NodeSetup& setup);

}  // namespace sray::jobsetup
