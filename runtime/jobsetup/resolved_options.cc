#include "jobsetup/resolved_options.h"

#include "jobsetup/config_file.h"

namespace sray::jobsetup {

const std::string& ResolvedOptions::Get(std::string_view key) const {
  static const std::string kEmpty;
  const auto found = values_.find(key);
  return found == values_.end() ? kEmpty : found->second.first;
}

const std::string& ResolvedOptions::SourceOf(std::string_view key) const {
  static const std::string kUnset = "unset";
  const auto found = values_.find(key);
  return found == values_.end() ? kUnset : found->second.second;
}

void ResolvedOptions::Set(const OptionAssignment& assignment) {
  values_[assignment.key] = {assignment.value, assignment.source};
}

std::vector<std::pair<std::string, std::string>> ResolvedOptions::EnvironmentVariables() const {
  std::vector<std::pair<std::string, std::string>> variables;
  for (const auto& spec : OptionSchema()) {
    const std::string& value = Get(spec.key);
    if (!value.empty() && !spec.environment_variable.empty()) {
      variables.emplace_back(std::string(spec.environment_variable), value);
    }
  }
  return variables;
}

std::vector<std::string> ResolvedOptions::UnsetEnvironmentVariables() const {
  std::vector<std::string> names;
  for (const auto& spec : OptionSchema()) {
    if (Get(spec.key).empty() && !spec.environment_variable.empty()) {
      names.emplace_back(spec.environment_variable);
    }
  }
  return names;
}

std::string ResolvedOptions::ToOptionList() const {
  std::string list;
  for (const auto& spec : OptionSchema()) {
    const std::string& value = Get(spec.key);
    if (value.empty()) continue;
    if (!list.empty()) list += ',';
    list += std::string(spec.key) + "=" + value;
  }
  return list;
}

Result<ResolvedOptions> ResolveOptions(const ResolveInputs& inputs) {
  ResolvedOptions options;
  for (const auto& spec : OptionSchema()) {
    if (!spec.default_value.empty()) {
      options.Set({std::string(spec.key), std::string(spec.default_value), "default"});
    }
  }
  if (inputs.admin_config) {
    auto admin = ReadConfigFile(*inputs.admin_config);
    if (!admin.ok()) return admin.status().WithContext("admin configuration");
    for (const auto& assignment : *admin) options.Set(assignment);
  }

  auto command_line = ParseOptionList(inputs.option_list, "--ray-cluster");
  if (!command_line.ok()) return command_line.status();
  for (const auto& assignment : *command_line) {
    if (assignment.key != "config") continue;
    auto user = ReadConfigFile(assignment.value);
    if (!user.ok()) return user.status().WithContext("user configuration (config=)");
    for (const auto& from_file : *user) options.Set(from_file);
  }
  for (const auto& assignment : *command_line) options.Set(assignment);
  return options;
}

}  // namespace sray::jobsetup
