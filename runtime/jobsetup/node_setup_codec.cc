#include "jobsetup/node_setup_codec.h"

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "jobsetup/field_codec.h"

namespace sray::jobsetup {
namespace {

constexpr std::string_view kVersion = "sray-node-setup-1";
constexpr std::string_view kSetUp = "ok";
constexpr std::string_view kFailed = "failed";

Status Corrupt(std::string_view what) {
  return Status::Internal("the node setup sent by the preparing process is corrupt (" +
                          std::string(what) + "): this is a bug, please report it");
}

}  // namespace

std::string EncodeNodeSetupResult(const Result<NodeSetup>& result) {
  FieldWriter writer;
  writer.Field(kVersion);
  if (!result.ok()) {
    writer.Field(kFailed);
    writer.Number(static_cast<std::uint64_t>(result.status().code()));
    writer.Field(result.status().message());
    return std::move(writer).Take();
  }
  const NodeSetup& setup = *result;
  const TaskEnvironment& environment = setup.environment;
  writer.Field(kSetUp);
  writer.Field(setup.session_directory.string());
  writer.Field(environment.role);
  writer.Number(environment.node_id);
  writer.Number(environment.num_nodes);
  writer.Field(environment.head_host);
  writer.Field(environment.session_dir);
  writer.Field(environment.job_id);
  writer.Field(environment.step_id);
  writer.Number(environment.node_cpus);
  writer.Number(environment.node_memory_bytes);
  writer.Pairs(environment.option_variables);
  writer.Pairs(environment.activation_variables);
  writer.Number(environment.unset_variables.size());
  for (const auto& name : environment.unset_variables) writer.Field(name);
  return std::move(writer).Take();
}

Result<NodeSetup> DecodeNodeSetupResult(std::string_view bytes) {
  if (bytes.empty()) return Corrupt("nothing was sent; the process probably died");
  FieldReader reader(bytes);
  if (reader.Field() != kVersion) return Corrupt("unknown format");
  const auto outcome = reader.Field();
  if (outcome == kFailed) {
    const auto code = reader.Number();
    auto message = reader.Field();
    if (!code || !message || !reader.AtEnd()) return Corrupt("truncated failure");
    return Status::FromCode(static_cast<StatusCode>(*code), std::move(*message));
  }
  if (outcome != kSetUp) return Corrupt("unknown outcome");

  NodeSetup setup;
  TaskEnvironment& environment = setup.environment;
  auto session_directory = reader.Field();
  auto role = reader.Field();
  auto node_id = reader.Number32();
  auto num_nodes = reader.Number32();
  auto head_host = reader.Field();
  auto session_dir = reader.Field();
  auto job_id = reader.Field();
  auto step_id = reader.Field();
  auto node_cpus = reader.Number32();
  auto node_memory = reader.Number();
  auto option_variables = reader.Pairs();
  auto activation_variables = reader.Pairs();
  if (!session_directory || !role || !node_id || !num_nodes || !head_host || !session_dir ||
      !job_id || !step_id || !node_cpus || !node_memory || !option_variables ||
      !activation_variables) {
    return Corrupt("truncated setup");
  }
  const auto unset_count = reader.Number();
  if (!unset_count || *unset_count > bytes.size()) return Corrupt("truncated setup");
  for (std::uint64_t i = 0; i < *unset_count; ++i) {
    auto name = reader.Field();
    if (!name) return Corrupt("truncated setup");
    environment.unset_variables.push_back(std::move(*name));
  }
  if (!reader.AtEnd()) return Corrupt("trailing bytes");
  setup.session_directory = std::move(*session_directory);
  environment.role = std::move(*role);
  environment.node_id = *node_id;
  environment.num_nodes = *num_nodes;
  environment.head_host = std::move(*head_host);
  environment.session_dir = std::move(*session_dir);
  environment.job_id = std::move(*job_id);
  environment.step_id = std::move(*step_id);
  environment.node_cpus = *node_cpus;
  environment.node_memory_bytes = *node_memory;
  environment.option_variables = std::move(*option_variables);
  environment.activation_variables = std::move(*activation_variables);
  return setup;
}

}  // namespace sray::jobsetup
