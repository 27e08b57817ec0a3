#pragma once

// The SRAY_* variables every task of a step receives, written by the job-setup
// library for both front ends and read back by the runtime. Keeping writer and
// reader together guarantees they agree on names and formats.
//
// Thread-safety: pure functions (TransportEnvironmentDefaults reads sysfs).

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"

namespace sray::jobsetup {

inline constexpr std::string_view kRoleHead = "head";
inline constexpr std::string_view kRoleWorker = "worker";

// Node 0 hosts the head services; every other node is a worker node.
std::string_view RoleForNode(std::uint32_t node_id);

struct TaskEnvironment {
  std::string role;
  std::uint32_t node_id = 0;
  std::uint32_t num_nodes = 0;
  std::string head_host;
  std::string session_dir;
  std::string job_id;
  std::string step_id;
  // CPUs this node gives the step: Slurm's allocation, or `sray run
  // --cpus-per-node`. The scheduler's CPU resource on the node.
  std::uint32_t node_cpus = 0;
  // Memory this node gives the step, in bytes: Slurm's allocation (or the
  // node's memory where the job asked for none), or `sray run
  // --mem-per-node`. The scheduler's "memory" resource on the node.
  std::uint64_t node_memory_bytes = 0;
  // Resolved options, as NAME=value (SRAY_TMPDIR, SRAY_LOG_LEVEL, ...).
  std::vector<std::pair<std::string, std::string>> option_variables;
  // The step's conda environment, activated (PATH, CONDA_PREFIX, ...,
  // SRAY_ENV_PREFIX, SRAY_ENV_HASH).
  std::vector<std::pair<std::string, std::string>> activation_variables;
  // Removed from every task's environment: the variables of unset options,
  // and what the environment's activate.d scripts unset.
  std::vector<std::string> unset_variables;
};

using EnvironmentVariables = std::vector<std::pair<std::string, std::string>>;

EnvironmentVariables ToEnvironmentVariables(const TaskEnvironment& environment);

// UCX settings every task needs and a user may override: front ends export
// them only where the task's environment does not set them already.
// Shared memory needs peer-failure support switched on, or UCX 1.13 drops it
// for endpoints that detect dead peers; UCX reads these transport settings
// after it has warned that they look unused, so that warning is switched off
// (UCX reads that switch when it is loaded, hence here and not in code).
// UCX's shared-memory segments go to the node's own directory in /dev/shm,
// which the step's teardown removes (node_shared_memory.h). Receive buffers
// of the shared-memory transports grow 128 at a time instead of 512: UCX
// allocates and registers the first chunk when each process makes its
// worker, and 512 buffers of 8 KiB (4 MiB per transport) took 3 ms of each
// process's 8 ms of UCX start here (bench/transport/process_start_cost); the
// pool still grows on demand. On a node without RDMA devices (nothing in
// `rdma_device_directory`), UCX does not load its InfiniBand and RDMA-CM
// modules: they find nothing to use, but loading them (libibverbs opens every
// provider library it knows) cost each process about 4 ms of CPU of its start
// here, a fifth of a worker's (bench/launch).
inline constexpr const char* kRdmaDeviceDirectory = "/sys/class/infiniband";
EnvironmentVariables TransportEnvironmentDefaults(
    const TaskEnvironment& environment,
    const std::filesystem::path& rdma_device_directory = kRdmaDeviceDirectory);

// Whether the step's output reaches the job user alone (a terminal, or a
// file nobody else may read): only then does the driver print its
// dashboard's one-time login link there, since anyone who reads the link
// first can log in. `sray run` sets it from its own standard output and error; under
// srun the readers of the output file are unknown to sray, so it is unset
// unless the user exports SRAY_OUTPUT_PRIVATE=1 for a private output.
inline constexpr const char* kOutputPrivateVariable = "SRAY_OUTPUT_PRIVATE";
std::pair<std::string, std::string> OutputPrivateVariable(bool output_private);
bool ReadOutputPrivate(const std::function<const char*(const char*)>& lookup);

// `lookup` returns the value of a variable or nullptr (getenv's contract).
// Fails with a message naming the missing or malformed variable.
Result<TaskEnvironment> ReadTaskEnvironment(const std::function<const char*(const char*)>& lookup);

}  // namespace sray::jobsetup
