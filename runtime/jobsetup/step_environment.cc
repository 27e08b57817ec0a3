#include "jobsetup/step_environment.h"

#include <fstream>

#include "envs/activation.h"
#include "envs/create.h"
#include "envs/lock.h"
#include "envs/pack.h"
#include "envs/readers.h"
#include "envs/stage.h"
#include "jobsetup/node_setup.h"

namespace sray::jobsetup {
namespace {

namespace fs = std::filesystem;

// Copies beyond this are evicted, least recently used first.
constexpr std::uint64_t kCacheLimitBytes = std::uint64_t{50} << 30;

// A packed environment is unpacked into the node's cache; a spec is matched
// against the copies there or created by the user's conda tool.
Result<envs::StagedEnvironment> StageFile(const StepEnvironmentRequest& request) {
  const fs::path cache_root = request.tmpdir / ("sray-envs-" + std::to_string(request.uid));
  if (envs::InspectPack(request.source).ok()) {
    return envs::StagePack(request.source, cache_root, kCacheLimitBytes);
  }
  if (auto spec = envs::ReadSpec(request.source); !spec.ok()) {
    return Status::InvalidArgument(
        "it is neither a prefix, a packed environment nor a spec conda writes (" +
        spec.status().message() + ")");
  }
  std::optional<std::string> path;
  if (request.task_variable) path = request.task_variable("PATH");
  return envs::StageSpec(request.source, cache_root, kCacheLimitBytes,
                         envs::FindCondaTool(path.value_or("")));
}

}  // namespace

Status PrepareStepEnvironment(const StepEnvironmentRequest& request, TaskEnvironment& environment) {
  const std::string what = "the step's environment " + request.source.string();
  std::error_code error;
  fs::path prefix = request.source;
  if (!fs::is_directory(request.source, error)) {
    if (!fs::exists(request.source, error)) {
      return Status::NotFound(what +
                              " does not exist on this node: give a prefix, a file made by "
                              "`sray env pack` or a spec (environment.yml, explicit file, lock), "
                              "on a path every node can read");
    }
    auto staged = StageFile(request);
    if (!staged.ok()) return staged.status().WithContext("cannot stage " + what);
    prefix = staged->prefix;
  }
  auto packages = envs::ReadPrefix(prefix);
  if (!packages.ok()) return packages.status().WithContext(what);
  auto lock = envs::MakeLock(*packages);
  if (!lock.ok()) return lock.status().WithContext(what);
  auto activation = envs::Activate(
      prefix, request.task_variable ? request.task_variable : [](const std::string&) {
        return std::optional<std::string>();
      });
  if (!activation.ok()) return activation.status().WithContext("cannot activate " + what);

  const fs::path lock_file = request.session_directory / kEnvironmentLockFile;
  {
    std::ofstream stream(lock_file, std::ios::trunc);
    stream << lock->text;
    if (!stream.flush()) return Status::IoError("cannot write " + lock_file.string());
  }
  environment.activation_variables.assign(activation->set.begin(), activation->set.end());
  environment.activation_variables.emplace_back("SRAY_ENV_PREFIX", prefix.string());
  environment.activation_variables.emplace_back("SRAY_ENV_HASH", lock->hash);
  environment.unset_variables = activation->unset;
  return Status::Ok();
}

}  // namespace sray::jobsetup
