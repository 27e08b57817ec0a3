#pragma once

// Creates a conda environment from a spec with the conda, mamba or micromamba
// the user has, then checks that what it installed matches the spec. sray
// solves and downloads nothing itself.
//
// Thread-safety: pure functions, apart from the child process they run.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "envs/interrupted.h"
#include "envs/package.h"

namespace sray::envs {

// The first of micromamba, mamba and conda found on `path_variable` (PATH's
// format, searched as execvp does); none: nullopt.
std::optional<std::filesystem::path> FindCondaTool(std::string_view path_variable);

// The command that creates `prefix` from `spec_file`: `create --file` for an
// explicit file, `env create --file` for an environment.yml, and pinned match
// specs (name=version=build from the listed channels) for a conda-lock.yml or
// a sray lock, which conda cannot read. Fails for what conda cannot create:
// a prefix, or a lock that lists pip packages.
Result<std::vector<std::string>> CreateCommand(const std::filesystem::path& tool,
                                               const std::filesystem::path& spec_file,
                                               const std::filesystem::path& prefix);

// How far the tool has come: creating an environment takes minutes (it
// downloads and links every package), so the caller can tell the user.
struct CreateProgress {
  double seconds = 0;
  std::uint64_t files = 0;  // in the prefix so far
  std::uint64_t bytes = 0;
  std::string last_line;  // the last line of the tool's log, if any
};
using CreateObserver = std::function<void(const CreateProgress&)>;

// Runs CreateCommand and verifies the result against the spec; a mismatch is
// an error listing the differences. The tool's output goes to `log_file`
// (replaced) where given, else to this process's stdout and stderr. While the
// tool runs, `observer` (if any) is called on this thread 2 s after the start
// and every 5 s after that. The tool gets this process's environment, with
// `tool_environment` ("NAME=value" entries) added or replacing its own.
Status CreateEnvironment(const std::filesystem::path& tool, const std::filesystem::path& spec_file,
                         const std::filesystem::path& prefix,
                         const std::optional<std::filesystem::path>& log_file = std::nullopt,
                         const CreateObserver& observer = {}, const Interrupted& interrupted = {},
                         const std::vector<std::string>& tool_environment = {});

}  // namespace sray::envs
