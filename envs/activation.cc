#include "envs/activation.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/captured_command.h"

namespace sray::envs {
namespace {

namespace fs = std::filesystem;

Status AddJsonVariables(const fs::path& file, const nlohmann::json& object, Activation& activation) {
  if (!object.is_object()) {
    return Status::InvalidArgument(file.string() + ": expected a JSON object of NAME: value");
  }
  for (const auto& [name, value] : object.items()) {
    if (!value.is_string()) {
      return Status::InvalidArgument(file.string() + ": variable " + name +
                                     R"( is not a string: write it as ")" + name + R"(": "value")");
    }
    activation.set[name] = value.get<std::string>();
  }
  return Status::Ok();
}

Result<nlohmann::json> ReadJson(const fs::path& file) {
  std::ifstream stream(file);
  if (!stream) return Status::FromErrno(errno, "cannot read " + file.string());
  try {
    return nlohmann::json::parse(stream);
  } catch (const nlohmann::json::exception& error) {
    return Status::InvalidArgument(file.string() + ": malformed JSON: " + error.what());
  }
}

std::vector<fs::path> Sorted(const fs::path& directory, const std::string& extension) {
  std::vector<fs::path> files;
  std::error_code error;
  if (!fs::is_directory(directory, error)) return files;
  for (const auto& entry : fs::directory_iterator(directory, error)) {
    if (entry.path().extension() == extension) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Sources `scripts` in bash with `environment` and returns the environment
// they leave (NUL-separated `env -0` output).
Result<std::map<std::string, std::string>> RunScripts(const std::vector<fs::path>& scripts,
                                                      const std::map<std::string, std::string>& environment) {
  std::string program = "set -e\n";
  for (const auto& script : scripts) program += ". '" + script.string() + "'\n";
  program += "env -0\n";
  std::vector<std::string> variables;
  variables.reserve(environment.size());
  for (const auto& [name, value] : environment) variables.push_back(name + "=" + value);
  // No time limit: a script may download or compile; one that hangs ends
  // with the step (Ctrl-C, scancel), as in a shell.
  auto ran = RunCapturing({.argv = {"/bin/bash", "-c", program},
                           .environment = std::move(variables),
                           .capture_errors = false,
                           .no_input = false,
                           .limit = std::nullopt,
                           .most_bytes = std::size_t{64} << 20});
  if (!ran.ok()) {
    return Status::IoError("cannot run the activate.d scripts: " + ran.status().message());
  }
  if (!ran->ExitedWith(0)) {
    std::string names;
    for (const auto& script : scripts) names += (names.empty() ? "" : ", ") + script.filename().string();
    return Status::InvalidArgument("an activate.d script failed (" + names + ", " + ran->How() +
                                   "): fix the script or remove it from the environment");
  }
  const std::string& output = ran->output;
  std::map<std::string, std::string> result;
  std::size_t start = 0;
  while (start < output.size()) {
    const auto end = output.find('\0', start);
    const std::string entry = output.substr(start, end - start);
    const auto equals = entry.find('=');
    if (equals != std::string::npos) result[entry.substr(0, equals)] = entry.substr(equals + 1);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return result;
}

}  // namespace

Result<Activation> Activate(const fs::path& prefix, const VariableLookup& current) {
  std::error_code error;
  if (!fs::is_directory(prefix / "conda-meta", error)) {
    return Status::NotFound(prefix.string() + " is not a conda environment (no conda-meta): give "
                            "the prefix of an existing environment");
  }
  Activation activation;
  const std::string bin = (prefix / "bin").string();
  const auto path = current("PATH");
  activation.set["PATH"] = path && !path->empty() ? bin + ":" + *path : bin;
  activation.set["CONDA_PREFIX"] = prefix.string();
  activation.set["CONDA_DEFAULT_ENV"] = prefix.string();
  activation.set["CONDA_SHLVL"] = "1";
  activation.set["CONDA_PROMPT_MODIFIER"] = "(" + prefix.string() + ") ";
  for (const auto& file : Sorted(prefix / "etc" / "conda" / "env_vars.d", ".json")) {
    auto json = ReadJson(file);
    if (!json.ok()) return json.status();
    if (Status added = AddJsonVariables(file, *json, activation); !added.ok()) return added;
  }
  const fs::path state = prefix / "conda-meta" / "state";
  if (fs::exists(state, error)) {
    auto json = ReadJson(state);
    if (!json.ok()) return json.status();
    if (json->is_object() && json->contains("env_vars")) {
      if (Status added = AddJsonVariables(state, (*json)["env_vars"], activation); !added.ok()) return added;
    }
  }
  const auto scripts = Sorted(prefix / "etc" / "conda" / "activate.d", ".sh");
  if (scripts.empty()) return activation;

  // The scripts see what a shell would: the current variables plus ours.
  std::map<std::string, std::string> before;
  for (const char* name : {"HOME", "USER", "LANG", "TMPDIR", "LD_LIBRARY_PATH"}) {
    if (auto value = current(name)) before[name] = *value;
  }
  for (const auto& [name, value] : activation.set) before[name] = value;
  auto after = RunScripts(scripts, before);
  if (!after.ok()) return after.status().WithContext(prefix.string());
  for (const auto& [name, value] : *after) {
    if (name == "_" || name == "SHLVL" || name == "PWD" || name == "OLDPWD") continue;
    auto found = before.find(name);
    if (found == before.end() || found->second != value) activation.set[name] = value;
  }
  for (const auto& [name, value] : before) {
    if (!after->contains(name)) {
      activation.set.erase(name);
      activation.unset.push_back(name);
    }
  }
  for (const auto& script : scripts) activation.scripts_run.push_back(script.filename().string());
  return activation;
}

}  // namespace sray::envs
