#include "env_command.h"

#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "command_line.h"
#include "envs/create.h"
#include "envs/lock.h"
#include "envs/pack.h"
#include "envs/readers.h"
#include "envs/stage.h"
#include "envs/verify.h"
#include "inherited_signals.h"
#include "local_job.h"

namespace sray::launcher {
namespace {

struct EnvArguments {
  std::string spec;
  std::string prefix;
  std::string output;
  std::string cache;
  std::uint64_t cache_limit_gib = 50;
};

int Report(const Status& status, const std::string& what) {
  std::cerr << "sray: env " << what << ": " << status.message() << "\n";
  return 2;
}

volatile std::sig_atomic_t interrupting_signal = 0;

extern "C" void NoteInterrupt(int signal) {
  interrupting_signal = signal;
}

// Ctrl-C, kill, Ctrl-\ (SIGQUIT) or a hang-up while create, pack, unpack or stage runs: the work
// stops at its next check and removes what it half made, and the conda tool
// (in a process group of its own, which Ctrl-C does not reach) is ended with
// it; then this process ends by the signal. Before, the default action ended
// sray at once and left the tool running. Signals the caller ignored (nohup,
// a script's background job) stay ignored.
class InterruptWatch {
 public:
  InterruptWatch() {
    for (const int signal : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
      struct sigaction before {};
      if (::sigaction(signal, nullptr, &before) != 0) continue;
      // UCX's initializer replaced an inherited SIGHUP ignore with its own
      // handler (inherited_signals.h).
      if (before.sa_handler == SIG_IGN || (signal == SIGHUP && HangUpIgnoredAtStart())) continue;
      struct sigaction noting {};
      noting.sa_handler = NoteInterrupt;
      sigemptyset(&noting.sa_mask);
      if (::sigaction(signal, &noting, nullptr) == 0) replaced_.emplace_back(signal, before);
    }
  }
  InterruptWatch(const InterruptWatch&) = delete;
  InterruptWatch& operator=(const InterruptWatch&) = delete;
  ~InterruptWatch() {
    for (const auto& [signal, before] : replaced_) ::sigaction(signal, &before, nullptr);
  }

  static bool Interrupted() { return interrupting_signal != 0; }
  // Ends the process by the signal that interrupted the work, if one did.
  // Also after work that finished: a signal that came after its last check
  // still ends the process by it (with the work whole), so that the
  // caller's shell sees the interrupt and stops (a loop, `set -e`), as it
  // would had the signal come a moment earlier.
  static void EndIfInterrupted() {
    if (interrupting_signal != 0) EndBySignal(interrupting_signal);
  }

 private:
  std::vector<std::pair<int, struct sigaction>> replaced_;
};

int RunLock(const EnvArguments& arguments) {
  auto list = envs::ReadSpec(arguments.spec);
  if (!list.ok()) return Report(list.status(), "lock");
  auto lock = envs::MakeLock(*list);
  if (!lock.ok()) return Report(lock.status(), "lock");
  if (arguments.output.empty()) {
    std::cout << lock->text;
    return 0;
  }
  const std::filesystem::path target(arguments.output);
  const std::filesystem::path temporary = target.string() + ".tmp";
  std::error_code error;
  {
    std::ofstream file(temporary, std::ios::trunc);
    file << lock->text;
    if (!file.flush()) {
      const Status failed = Status::FromErrno(errno, "cannot write " + temporary.string());
      std::filesystem::remove(temporary, error);
      return Report(failed, "lock");
    }
  }
  std::filesystem::rename(temporary, target, error);  // never a half-written lock
  if (error) {
    const Status failed =
        Status::IoError("cannot write " + target.string() + ": " + error.message());
    std::filesystem::remove(temporary, error);
    return Report(failed, "lock");
  }
  std::cout << "sray: locked " << list->packages.size() << " packages of " << list->source << " to "
            << target.string() << " (sha256 " << lock->hash << ")\n";
  return 0;
}

int RunVerify(const EnvArguments& arguments) {
  auto spec = envs::ReadSpec(arguments.spec);
  if (!spec.ok()) return Report(spec.status(), "verify");
  auto installed = envs::ReadPrefix(arguments.prefix);
  if (!installed.ok()) return Report(installed.status(), "verify");
  const auto differences = envs::Compare(*spec, *installed);
  if (!differences.not_compared.empty()) {
    std::cout << "sray: " << differences.not_compared.size() << " pip package"
              << (differences.not_compared.size() == 1 ? " was" : "s were")
              << " not compared: " << spec->source
              << " is a conda explicit file, which cannot list pip packages (verify against "
                 "`conda env export` or a sray lock to check them)\n";
  }
  if (differences.empty()) {
    std::cout << "sray: " << installed->source << " matches " << spec->source << " ("
              << spec->packages.size() << " packages" << (spec->complete ? "" : " asked for")
              << ")\n";
    return 0;
  }
  for (const auto& line : envs::Describe(differences)) std::cout << line << "\n";
  std::cerr << "sray: env verify: " << installed->source << " differs from " << spec->source << " ("
            << differences.missing.size() << " missing, " << differences.extra.size() << " extra, "
            << differences.mismatched.size()
            << " mismatched): recreate the environment from the spec, or lock what is installed\n";
  return 1;
}

int RunPack(const EnvArguments& arguments) {
  InterruptWatch watch;
  auto packed = envs::Pack(arguments.prefix, arguments.output, &InterruptWatch::Interrupted);
  if (!packed.ok()) {
    const int code = Report(packed.status(), "pack");
    InterruptWatch::EndIfInterrupted();
    return code;
  }
  std::cout << "sray: packed " << packed->files << " files (" << packed->bytes << " bytes, "
            << packed->relocated_files << " holding the prefix) of " << packed->recorded_prefix
            << " to " << arguments.output << " (lock sha256 " << packed->lock_hash << ")\n";
  InterruptWatch::EndIfInterrupted();
  return 0;
}

int RunUnpack(const EnvArguments& arguments) {
  InterruptWatch watch;
  auto unpacked = envs::Unpack(arguments.spec, arguments.prefix, {}, &InterruptWatch::Interrupted);
  if (!unpacked.ok()) {
    const int code = Report(unpacked.status(), "unpack");
    InterruptWatch::EndIfInterrupted();
    return code;
  }
  std::cout << "sray: unpacked " << unpacked->files << " files to " << arguments.prefix << " ("
            << unpacked->relocated_files << " relocated from " << unpacked->recorded_prefix
            << ")\n";
  InterruptWatch::EndIfInterrupted();
  return 0;
}

int RunStage(const EnvArguments& arguments) {
  const std::string cache =
      arguments.cache.empty() ? "/tmp/sray-envs-" + std::to_string(::getuid()) : arguments.cache;
  InterruptWatch watch;
  auto staged = envs::StagePack(arguments.spec, cache, arguments.cache_limit_gib << 30, {},
                                &InterruptWatch::Interrupted);
  if (!staged.ok()) {
    const int code = Report(staged.status(), "stage");
    InterruptWatch::EndIfInterrupted();
    return code;
  }
  std::cout << staged->prefix.string() << "\n";
  std::cerr << "sray: " << (staged->reused ? "reused" : "staged") << " " << staged->prefix.string()
            << " (lock sha256 " << staged->lock_hash << ")"
            << (staged->evicted > 0
                    ? ", evicted " + std::to_string(staged->evicted) + " older copies"
                    : "")
            << "\n";
  InterruptWatch::EndIfInterrupted();
  return 0;
}

int RunCreate(const EnvArguments& arguments) {
  // A malformed spec is reported before a missing tool: it needs fixing either way.
  if (auto spec = envs::ReadSpec(arguments.spec); !spec.ok())
    return Report(spec.status(), "create");
  const char* path = std::getenv("PATH");
  const auto tool = envs::FindCondaTool(path == nullptr ? "" : path);
  if (!tool) {
    return Report(Status::NotFound("no conda, mamba or micromamba on PATH: install one (micromamba "
                                   "is a single static binary) and run this again"),
                  "create");
  }
  std::error_code error;
  const bool existed = std::filesystem::exists(arguments.prefix, error) || error;
  InterruptWatch watch;
  const Status created = envs::CreateEnvironment(*tool, arguments.spec, arguments.prefix,
                                                 std::nullopt, {}, &InterruptWatch::Interrupted);
  if (!created.ok()) {
    const int code = Report(created, "create");
    // Cut short, it is no environment: what the tool made of it goes (a
    // directory that was there before is the user's, and stays).
    if (InterruptWatch::Interrupted() && !existed)
      std::filesystem::remove_all(arguments.prefix, error);
    InterruptWatch::EndIfInterrupted();
    return code;
  }
  std::cout << "sray: created " << arguments.prefix << " with " << tool->string() << "\n";
  InterruptWatch::EndIfInterrupted();
  return 0;
}

}  // namespace

void AddEnvCommand(CLI::App& app) {
  auto* env = app.add_subcommand(
      "env", "Conda-exported environments: lock, verify, pack, unpack, stage, create");
  env->require_subcommand(1);
  auto arguments = std::make_shared<EnvArguments>();
  auto* lock = env->add_subcommand(
      "lock", "Print (or write) the canonical lock of a prefix or a complete spec, with its hash");
  lock->add_option("source", arguments->spec,
                   "A prefix, an environment.yml with builds, an explicit file or a conda-lock.yml")
      ->required();
  lock->add_option("-o,--output", arguments->output, "Write the lock to this file");
  lock->callback([arguments] { throw CLI::RuntimeError(RunLock(*arguments)); });

  auto* verify = env->add_subcommand(
      "verify", "List packages missing from, extra in, or different in PREFIX; non-zero if any");
  verify
      ->add_option("spec", arguments->spec,
                   "environment.yml, explicit file, conda-lock.yml, sray lock or another prefix")
      ->required();
  verify->add_option("prefix", arguments->prefix, "The environment to check")->required();
  verify->callback([arguments] { throw CLI::RuntimeError(RunVerify(*arguments)); });

  auto* pack = env->add_subcommand("pack", "Pack a prefix into one file that unpacks anywhere");
  pack->add_option("prefix", arguments->prefix, "The environment to pack")->required();
  pack->add_option("-o,--output", arguments->output, "The packed file")->required();
  pack->callback([arguments] { throw CLI::RuntimeError(RunPack(*arguments)); });

  auto* unpack = env->add_subcommand(
      "unpack", "Unpack a packed environment into a new directory, rewriting its prefix");
  unpack->add_option("pack", arguments->spec, "A file made by `sray env pack`")->required();
  unpack->add_option("prefix", arguments->prefix, "The new environment's directory")->required();
  unpack->callback([arguments] { throw CLI::RuntimeError(RunUnpack(*arguments)); });

  auto* stage = env->add_subcommand(
      "stage",
      "Unpack a packed environment into this node's cache, once per lock hash; print its prefix");
  stage->add_option("pack", arguments->spec, "A file made by `sray env pack`")->required();
  stage->add_option("--cache", arguments->cache, "Cache directory (default /tmp/sray-envs-UID)");
  // Bounded so that the size in bytes (GiB << 30) cannot wrap.
  stage
      ->add_option("--cache-limit-gib", arguments->cache_limit_gib,
                   "Remove the least recently used copies beyond this size (default 50)")
      ->check(WholeNumberFrom(1, std::uint64_t{1} << 30));
  stage->callback([arguments] { throw CLI::RuntimeError(RunStage(*arguments)); });

  auto* create =
      env->add_subcommand("create", "Create PREFIX from SPEC with conda, mamba or micromamba");
  create->add_option("spec", arguments->spec, "environment.yml or explicit file")->required();
  create->add_option("-p,--prefix", arguments->prefix, "Where to create it")->required();
  create->callback([arguments] { throw CLI::RuntimeError(RunCreate(*arguments)); });
}

}  // namespace sray::launcher
