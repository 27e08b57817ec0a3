#include "jobsetup/node_setup.h"

#include <unistd.h>

#include <filesystem>
#include <optional>

#include "common/whole_number.h"
#include "common/worker_log_files.h"
#include "jobsetup/node_shared_memory.h"
#include "jobsetup/session_directory.h"
#include "jobsetup/step_environment.h"
#include "jobsetup/step_processes.h"
#include "object/store_capacity.h"

namespace sray::jobsetup {

Result<NodeSetup> PrepareNode(const NodeSetupRequest& request) {
  if (request.num_nodes == 0 || request.node_id >= request.num_nodes) {
    return Status::InvalidArgument("node " + std::to_string(request.node_id) + " of " +
                                   std::to_string(request.num_nodes) +
                                   " is out of range: this is a launcher bug, please report it");
  }
  if (request.node_cpus == 0) {
    return Status::InvalidArgument(
        "node " + std::to_string(request.node_id) +
        " offers no CPUs to the step: request at least one CPU per node");
  }
  if (request.node_memory_bytes == 0) {
    return Status::InvalidArgument("node " + std::to_string(request.node_id) +
                                   " offers no memory to the step: request some memory per node");
  }
  if (request.head_host.empty()) {
    return Status::InvalidArgument(
        "the head node's host name is unknown: check that Slurm "
        "sets SLURM_STEP_NODELIST for the step");
  }
  // Each rank checks again as it opens its store; failing here fails the
  // step once, before any task starts, instead of once per rank.
  std::optional<std::uint64_t> configured_store;
  if (const std::string& size = request.options.Get("object_store_memory"); !size.empty()) {
    configured_store = WholeNumber<std::uint64_t>(size);
  }
  auto store = object::StoreCapacityHere(kSharedMemoryDirectory, configured_store,
                                         request.nodes_on_this_machine);
  if (!store.ok()) return store.status();

  SessionIdentity identity{.uid = request.uid,
                           .job_id = request.job_id,
                           .step_id = request.step_id,
                           .node_id = request.session_directory_per_node
                                          ? std::optional<std::uint32_t>(request.node_id)
                                          : std::nullopt};
  auto path = SessionDirectoryPath(request.options.Get("tmpdir"), identity);
  if (!path.ok()) return path.status();
  SRAY_RETURN_IF_ERROR(CreateSessionDirectory(*path, request.uid));
  const std::string shared_memory_prefix =
      NodeSharedMemoryPrefix(request.job_id, request.step_id, request.node_id);
  if (Status created = CreateUcxSegmentDirectory(
          UcxSegmentDirectory(kSharedMemoryDirectory, shared_memory_prefix), request.uid);
      !created.ok()) {
    (void)RemoveSessionDirectory(*path);
    return created.WithContext("cannot prepare the node's shared memory");
  }

  NodeSetup setup;
  setup.session_directory = *path;
  setup.environment =
      TaskEnvironment{.role = std::string(RoleForNode(request.node_id)),
                      .node_id = request.node_id,
                      .num_nodes = request.num_nodes,
                      .head_host = request.head_host,
                      .session_dir = path->string(),
                      .job_id = request.job_id,
                      .step_id = request.step_id,
                      .node_cpus = request.node_cpus,
                      .node_memory_bytes = request.node_memory_bytes,
                      .option_variables = request.options.EnvironmentVariables(),
                      .activation_variables = {},
                      .unset_variables = request.options.UnsetEnvironmentVariables()};
  if (request.created) request.created(setup);
  if (const std::string& source = request.options.Get("env"); !source.empty()) {
    const Status prepared = PrepareStepEnvironment(
        StepEnvironmentRequest{.source = source,
                               .tmpdir = request.options.Get("tmpdir"),
                               .session_directory = *path,
                               .uid = request.uid,
                               .task_variable = request.task_variable,
                               .progress = request.progress,
                               .interrupted = request.interrupted,
                               .tool_environment = StepProcessMarkers(*path, request.node_id)},
        setup.environment);
    if (!prepared.ok()) {
      (void)TeardownNode(setup);  // nothing half-prepared stays
      return prepared;
    }
  }
  return setup;
}

std::uint64_t MachineMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size);
}

Status TeardownNode(const NodeSetup& setup) {
  if (setup.session_directory.empty()) return Status::Ok();
  // The node manager copies its workers' logs to log_dir= as it ends; node
  // 0's lives in the driver's process, and a driver killed by a signal (a
  // crash, an uncaught exception) never gets there: the logs that say why
  // went with the session directory. Copied here where no copy was made,
  // whole by now. A failure was the manager's to say; this is a second
  // chance only, and must not read as a failed removal.
  const TaskEnvironment& job = setup.environment;
  for (const auto& [name, value] : job.option_variables) {
    if (name != "SRAY_LOG_DIR" || value.empty()) continue;
    const std::filesystem::path logs = setup.session_directory / "logs";
    const std::filesystem::path copy = std::filesystem::path(value) /
                                       (job.job_id + "." + job.step_id) /
                                       ("node-" + std::to_string(job.node_id));
    std::error_code error;
    if (std::filesystem::is_directory(logs, error) && !std::filesystem::exists(copy, error) &&
        !error) {
      (void)CopyWorkerLogs(logs, copy);
    }
  }
  const Status session = RemoveSessionDirectory(setup.session_directory);
  const TaskEnvironment& environment = setup.environment;
  auto shared_memory = RemoveNodeSharedMemory(
      kSharedMemoryDirectory,
      NodeSharedMemoryPrefix(environment.job_id, environment.step_id, environment.node_id));
  if (!session.ok()) return session;
  return shared_memory.status();
}

}  // namespace sray::jobsetup
