#include "jobsetup/task_environment.h"

#include "common/whole_number.h"
#include "jobsetup/node_shared_memory.h"
#include "jobsetup/options.h"

namespace sray::jobsetup {
namespace {

constexpr const char* kRoleVariable = "SRAY_ROLE";
constexpr const char* kNodeIdVariable = "SRAY_NODE_ID";
constexpr const char* kNumNodesVariable = "SRAY_NUM_NODES";
constexpr const char* kHeadHostVariable = "SRAY_HEAD_HOST";
constexpr const char* kSessionDirVariable = "SRAY_SESSION_DIR";
constexpr const char* kJobIdVariable = "SRAY_JOB_ID";
constexpr const char* kStepIdVariable = "SRAY_STEP_ID";
constexpr const char* kNodeCpusVariable = "SRAY_NODE_CPUS";
constexpr const char* kNodeMemoryVariable = "SRAY_NODE_MEMORY";

Status NotLaunchedBySray(const char* variable, std::string_view why) {
  return Status::NotFound(std::string(variable) + " " + std::string(why) +
                          ": start the program with `srun --ray-cluster` or `sray run`");
}

Result<std::string> Required(const std::function<const char*(const char*)>& lookup,
                             const char* variable) {
  const char* value = lookup(variable);
  if (value == nullptr || *value == '\0') return NotLaunchedBySray(variable, "is not set");
  return std::string(value);
}

template <typename Number = std::uint32_t>
Result<Number> RequiredNumber(const std::function<const char*(const char*)>& lookup,
                              const char* variable) {
  auto text = Required(lookup, variable);
  if (!text.ok()) return text.status();
  const auto number = WholeNumber<Number>(*text);
  if (!number) return NotLaunchedBySray(variable, "is '" + *text + "', not a number");
  return *number;
}

// A directory that cannot be read counts as devices present: UCX then
// looks for itself, as without sray.
bool HasRdmaDevices(const std::filesystem::path& directory) {
  std::error_code error;
  if (!std::filesystem::exists(directory, error)) return error.value() != 0;
  std::filesystem::directory_iterator entries(directory, error);
  if (error) return true;
  return entries != std::filesystem::directory_iterator();
}

}  // namespace

std::string_view RoleForNode(std::uint32_t node_id) {
  return node_id == 0 ? kRoleHead : kRoleWorker;
}

EnvironmentVariables ToEnvironmentVariables(const TaskEnvironment& environment) {
  EnvironmentVariables variables = {
      {kRoleVariable, environment.role},
      {kNodeIdVariable, std::to_string(environment.node_id)},
      {kNumNodesVariable, std::to_string(environment.num_nodes)},
      {kHeadHostVariable, environment.head_host},
      {kSessionDirVariable, environment.session_dir},
      {kJobIdVariable, environment.job_id},
      {kStepIdVariable, environment.step_id},
      {kNodeCpusVariable, std::to_string(environment.node_cpus)},
      {kNodeMemoryVariable, std::to_string(environment.node_memory_bytes)},
  };
  variables.insert(variables.end(), environment.option_variables.begin(),
                   environment.option_variables.end());
  variables.insert(variables.end(), environment.activation_variables.begin(),
                   environment.activation_variables.end());
  return variables;
}

EnvironmentVariables TransportEnvironmentDefaults(
    const TaskEnvironment& environment, const std::filesystem::path& rdma_device_directory) {
  const std::string prefix =
      NodeSharedMemoryPrefix(environment.job_id, environment.step_id, environment.node_id);
  EnvironmentVariables variables = {
      {"UCX_POSIX_ERROR_HANDLING", "y"},
      {"UCX_SYSV_ERROR_HANDLING", "y"},
      {"UCX_POSIX_RX_BUFS_GROW", "128"},
      {"UCX_SYSV_RX_BUFS_GROW", "128"},
      {"UCX_WARN_UNUSED_ENV_VARS", "n"},
      {"UCX_POSIX_DIR", UcxSegmentDirectory(kSharedMemoryDirectory, prefix).string()}};
  if (!HasRdmaDevices(rdma_device_directory)) variables.emplace_back("UCX_MODULES", "^ib,rdmacm");
  return variables;
}

std::pair<std::string, std::string> OutputPrivateVariable(bool output_private) {
  return {kOutputPrivateVariable, output_private ? "1" : "0"};
}

bool ReadOutputPrivate(const std::function<const char*(const char*)>& lookup) {
  const char* value = lookup(kOutputPrivateVariable);
  return value != nullptr && std::string_view(value) == "1";
}

Result<TaskEnvironment> ReadTaskEnvironment(const std::function<const char*(const char*)>& lookup) {
  TaskEnvironment environment;
  auto role = Required(lookup, kRoleVariable);
  if (!role.ok()) return role.status();
  if (*role != kRoleHead && *role != kRoleWorker) {
    return NotLaunchedBySray(kRoleVariable, "is '" + *role + "', neither head nor worker");
  }
  environment.role = std::move(role).value();

  auto node_id = RequiredNumber(lookup, kNodeIdVariable);
  if (!node_id.ok()) return node_id.status();
  auto num_nodes = RequiredNumber(lookup, kNumNodesVariable);
  if (!num_nodes.ok()) return num_nodes.status();
  if (*node_id >= *num_nodes) {
    return NotLaunchedBySray(kNodeIdVariable, "is not below SRAY_NUM_NODES");
  }
  if (environment.role != RoleForNode(*node_id)) {
    return NotLaunchedBySray(kRoleVariable, "does not match SRAY_NODE_ID");
  }
  environment.node_id = *node_id;
  environment.num_nodes = *num_nodes;
  auto node_cpus = RequiredNumber(lookup, kNodeCpusVariable);
  if (!node_cpus.ok()) return node_cpus.status();
  environment.node_cpus = *node_cpus;
  auto node_memory = RequiredNumber<std::uint64_t>(lookup, kNodeMemoryVariable);
  if (!node_memory.ok()) return node_memory.status();
  environment.node_memory_bytes = *node_memory;

  for (auto [variable, field] : {std::pair{kHeadHostVariable, &environment.head_host},
                                 std::pair{kSessionDirVariable, &environment.session_dir},
                                 std::pair{kJobIdVariable, &environment.job_id},
                                 std::pair{kStepIdVariable, &environment.step_id}}) {
    auto value = Required(lookup, variable);
    if (!value.ok()) return value.status();
    *field = std::move(value).value();
  }
  for (const auto& spec : OptionSchema()) {
    const std::string name(spec.environment_variable);
    if (const char* value = lookup(name.c_str()); value != nullptr) {
      environment.option_variables.emplace_back(name, value);
    }
  }
  return environment;
}

}  // namespace sray::jobsetup
