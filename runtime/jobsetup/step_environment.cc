#include "jobsetup/step_environment.h"

#include <chrono>
#include <cstdio>
#include <fstream>

#include "common/log.h"
#include "common/mebibytes.h"
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
double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Unpacking as the user sees it: a line at most once a second, after the
// first second.
class StagingProgress {
 public:
  explicit StagingProgress(const StepEnvironmentRequest& request)
      : request_(request), started_(std::chrono::steady_clock::now()) {
    std::error_code error;
    pack_bytes_ = fs::file_size(request.source, error);
  }
  void operator()(const envs::UnpackProgress& progress) {
    last_ = progress;
    if (!request_.progress) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - started_ < std::chrono::seconds(1) || now - told_ < std::chrono::seconds(1)) return;
    told_ = now;
    request_.progress("staging " + request_.source.string() + ": " +
                      std::to_string(progress.files) + " files, " + Mebibytes(progress.bytes) +
                      " written (the pack is " + Mebibytes(pack_bytes_) + ")");
  }
  // A spec's environment is made by the user's conda tool, for minutes:
  // CreateEnvironment calls this after 2 s and then every 5 s.
  void operator()(const envs::CreateProgress& progress, const std::string& tool) {
    if (!request_.progress) return;
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%.0f s", progress.seconds);
    request_.progress("creating the environment of " + request_.source.string() + " with " +
                      tool + ": " + seconds + ", " + std::to_string(progress.files) + " files, " +
                      Mebibytes(progress.bytes) + " so far" +
                      (progress.last_line.empty() ? "" : "; " + tool + ": " + progress.last_line));
  }
  [[nodiscard]] const envs::UnpackProgress& last() const { return last_; }
  [[nodiscard]] std::chrono::steady_clock::time_point started() const { return started_; }

 private:
  const StepEnvironmentRequest& request_;
  const std::chrono::steady_clock::time_point started_;
  std::chrono::steady_clock::time_point told_{};
  std::uint64_t pack_bytes_ = 0;
  envs::UnpackProgress last_;
};

Result<envs::StagedEnvironment> StageFile(const StepEnvironmentRequest& request,
                                          StagingProgress& progress) {
  const fs::path cache_root = request.tmpdir / ("sray-envs-" + std::to_string(request.uid));
  if (envs::InspectPack(request.source).ok()) {
    return envs::StagePack(
        request.source, cache_root, kCacheLimitBytes,
        [&progress](const envs::UnpackProgress& now) { progress(now); }, request.interrupted);
  }
  if (auto spec = envs::ReadSpec(request.source); !spec.ok()) {
    return Status::InvalidArgument(
        "it is neither a prefix, a packed environment nor a spec conda writes (" +
        spec.status().message() + ")");
  }
  std::optional<std::string> path;
  if (request.task_variable) path = request.task_variable("PATH");
  const auto tool = envs::FindCondaTool(path.value_or(""));
  const std::string tool_name = tool ? tool->filename().string() : std::string();
  envs::CreateObserver observer;
  if (request.progress) {
    observer = [&progress, &tool_name](const envs::CreateProgress& now) { progress(now, tool_name); };
  }
  return envs::StageSpec(request.source, cache_root, kCacheLimitBytes, tool, observer,
                         request.interrupted, request.tool_environment);
}

}  // namespace

Status PrepareStepEnvironment(const StepEnvironmentRequest& request, TaskEnvironment& environment) {
  const std::string what = "the step's environment " + request.source.string();
  std::error_code error;
  fs::path prefix = request.source;
  StagingProgress progress(request);
  std::string note = "used the prefix " + request.source.string() + " where it is";
  if (!fs::is_directory(request.source, error)) {
    if (!fs::exists(request.source, error)) {
      return Status::NotFound(what +
                              " does not exist on this node: give a prefix, a file made by "
                              "`sray env pack` or a spec (environment.yml, explicit file, lock), "
                              "on a path every node can read");
    }
    auto staged = StageFile(request, progress);
    if (!staged.ok()) return staged.status().WithContext("cannot stage " + what);
    prefix = staged->prefix;
    const std::string seconds =
        DescribeSeconds(std::chrono::steady_clock::now() - progress.started());
    if (staged->reused) {
      note = "used the copy of " + request.source.string() + " staged on this node before (" +
             prefix.string() + ")";
    } else if (progress.last().files > 0) {
      note = "staged " + request.source.string() + " into " + prefix.string() + " in " + seconds +
             " (" + std::to_string(progress.last().files) + " files, " +
             Mebibytes(progress.last().bytes) + ")";
    } else {
      note = "made " + prefix.string() + " from " + request.source.string() + " in " + seconds;
    }
    if (request.progress && SecondsSince(progress.started()) >= 1) request.progress(note);
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
  {
    const fs::path note_file = request.session_directory / kEnvironmentNoteFile;
    std::ofstream stream(note_file, std::ios::trunc);
    stream << note << "\n";
    if (!stream.flush()) return Status::IoError("cannot write " + note_file.string());
  }
  environment.activation_variables.assign(activation->set.begin(), activation->set.end());
  environment.activation_variables.emplace_back("SRAY_ENV_PREFIX", prefix.string());
  environment.activation_variables.emplace_back("SRAY_ENV_HASH", lock->hash);
  environment.unset_variables.insert(environment.unset_variables.end(), activation->unset.begin(),
                                     activation->unset.end());
  return Status::Ok();
}

}  // namespace sray::jobsetup
