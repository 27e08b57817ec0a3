#include "jobsetup/step_environment.h"

#include <fstream>

#include "envs/activation.h"
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

}  // namespace

Status PrepareStepEnvironment(const StepEnvironmentRequest& request, TaskEnvironment& environment) {
  const std::string what = "the step's environment " + request.source.string();
  std::error_code error;
  fs::path prefix = request.source;
  if (!fs::is_directory(request.source, error)) {
    if (!fs::exists(request.source, error)) {
      return Status::NotFound(what + " does not exist on this node: give a prefix or a file made by "
                              "`sray env pack`, on a path every node can read");
    }
    auto pack = envs::InspectPack(request.source);
    if (!pack.ok()) {
      return Status::InvalidArgument(what + " is neither a prefix nor a packed environment (" +
                                     pack.status().message() +
                                     "): for an environment.yml, explicit file or lock, create the "
                                     "environment first (`sray env create`) and pack it (`sray env pack`)");
    }
    auto staged = envs::StagePack(request.source,
                                  request.tmpdir / ("sray-envs-" + std::to_string(request.uid)),
                                  kCacheLimitBytes);
    if (!staged.ok()) return staged.status().WithContext("cannot stage " + what);
    prefix = staged->prefix;
  }
  auto packages = envs::ReadPrefix(prefix);
  if (!packages.ok()) return packages.status().WithContext(what);
  auto lock = envs::MakeLock(*packages);
  if (!lock.ok()) return lock.status().WithContext(what);
  auto activation = envs::Activate(prefix, request.task_variable
                                               ? request.task_variable
                                               : [](const std::string&) { return std::optional<std::string>(); });
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
