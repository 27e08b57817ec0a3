#pragma once

// The step's conda environment on one node (`--ray-cluster=env=PATH`):
// a prefix is used where it is; a packed file is staged into the node's
// cache under tmpdir (once per lock hash, shared by concurrent jobs). The
// prefix is then activated for every task (envs::Activate) and its lock is
// written to the session directory, where the runtime reads it to compare
// the nodes of the step before user code runs. What was done (staged, with
// files, bytes and time; reused; a prefix used in place) is written there
// too (kEnvironmentNoteFile), for the node's events on the dashboard.
//
// Thread-safety: called once per node by the front end.

#include <sys/types.h>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "common/status.h"
#include "jobsetup/task_environment.h"

namespace sray::jobsetup {

struct StepEnvironmentRequest {
  std::filesystem::path source;  // the env= value
  std::filesystem::path tmpdir;  // the tmpdir option: the staging cache lives here
  std::filesystem::path session_directory;
  uid_t uid = 0;
  std::function<std::optional<std::string>(const std::string& name)> task_variable;
  // Told how a long staging goes (a line at most once a second, none for one
  // that takes under a second); null: not told.
  std::function<void(const std::string& line)> progress;
  // Asked while staging whether the user interrupted the launch (envs/interrupted.h);
  // null: never.
  std::function<bool()> interrupted;
  // Added to the environment of the conda tool that creates a spec's
  // environment ("NAME=value"): the step's process markers, so that the
  // cleanup after a killed launcher ends the tool too.
  std::vector<std::string> tool_environment;
};

// Fills `environment`'s activation variables; errors name the environment
// and what to do.
Status PrepareStepEnvironment(const StepEnvironmentRequest& request, TaskEnvironment& environment);

}  // namespace sray::jobsetup
