#pragma once

// What `conda activate PREFIX` does to the environment, computed without an
// interactive shell, for every task of a step:
// - PATH gets PREFIX/bin in front; CONDA_PREFIX, CONDA_DEFAULT_ENV (the
//   prefix), CONDA_SHLVL=1 and CONDA_PROMPT_MODIFIER are set;
// - then the variables of etc/conda/env_vars.d/*.json (in file-name order),
//   then those of conda-meta/state ("env_vars"), as `conda env config vars`
//   keeps them: later ones win;
// - then the scripts in etc/conda/activate.d (*.sh, in name order) are
//   sourced once by bash with the variables above, and whatever they set,
//   change or unset is captured and applied too. A failing script is an
//   error, and nothing is applied.
//
// Thread-safety: Activate runs a child process when scripts exist; otherwise
// a pure function of the prefix's files.

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace sray::envs {

struct Activation {
  std::map<std::string, std::string> set;
  std::vector<std::string> unset;
  std::vector<std::string> scripts_run;  // activate.d scripts, for messages
};

using VariableLookup = std::function<std::optional<std::string>(const std::string& name)>;

Result<Activation> Activate(const std::filesystem::path& prefix, const VariableLookup& current);

}  // namespace sray::envs
