#include "envs/create.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <fstream>
#include <iterator>
#include <set>
#include <thread>

#include "common/executable_search.h"
#include "envs/readers.h"
#include "envs/tree_size.h"
#include "envs/verify.h"

extern char** environ;  // NOLINT(readability-redundant-declaration): posix_spawn's environment

namespace sray::envs {
namespace {

namespace fs = std::filesystem;

// The last line of a log the tool is writing, for a progress line: its last
// few KiB only, split at newlines and at the carriage returns of progress
// bars, without control characters, and shortened to 120 characters.
std::string LastLine(const fs::path& log_file) {
  constexpr std::streamoff kTail = 4096;
  std::ifstream stream(log_file, std::ios::binary);
  if (!stream) return {};
  stream.seekg(0, std::ios::end);
  const std::streamoff size = stream.tellg();
  stream.seekg(size > kTail ? size - kTail : 0);
  std::string tail((std::istreambuf_iterator<char>(stream)), std::istreambuf_iterator<char>());
  std::string line;
  std::string last;
  for (const char character : tail) {
    if (character == '\n' || character == '\r') {
      if (line.find_first_not_of(' ') != std::string::npos) last = line;
      line.clear();
    } else if (static_cast<unsigned char>(character) >= 0x20 && character != 0x7f) {
      line += character;
    }
  }
  if (line.find_first_not_of(' ') != std::string::npos) last = line;
  if (last.size() > 120) last = last.substr(0, 117) + "...";
  return last;
}

Result<std::vector<std::string>> PinnedPackages(const fs::path& spec_file) {
  auto spec = ReadSpec(spec_file);
  if (!spec.ok()) return spec.status();
  std::vector<std::string> channels;
  std::vector<std::string> pins;
  std::set<std::string> seen;
  for (const Package& package : spec->packages) {
    if (package.manager == Manager::kPip) {
      return Status::InvalidArgument(
          spec_file.string() + " lists pip package " + package.name +
          ", which conda cannot install from a lock: create the environment from its "
          "environment.yml instead");
    }
    if (!package.channel.empty() && seen.insert(package.channel).second) {
      channels.push_back(package.channel);
    }
    pins.push_back(package.name + "=" + package.version + "=" + package.build);
  }
  std::vector<std::string> arguments = {"--override-channels"};
  for (const auto& channel : channels) arguments.insert(arguments.end(), {"--channel", channel});
  arguments.insert(arguments.end(), pins.begin(), pins.end());
  return arguments;
}

}  // namespace

std::optional<fs::path> FindCondaTool(std::string_view path_variable) {
  for (const std::string_view tool : {"micromamba", "mamba", "conda"}) {
    if (auto found = FindExecutableOnPath(tool, path_variable)) return found;
  }
  return std::nullopt;
}

Result<std::vector<std::string>> CreateCommand(const fs::path& tool, const fs::path& spec_file,
                                               const fs::path& prefix) {
  auto format = DetectSpecFormat(spec_file);
  if (!format.ok()) return format.status();
  std::vector<std::string> command = {tool.string()};
  switch (*format) {
    case SpecFormat::kPrefix:
      return Status::InvalidArgument(spec_file.string() +
                                     " is an environment already: use it, or pack it with "
                                     "`sray env pack`");
    case SpecFormat::kExplicit:
      command.insert(command.end(), {"create", "--yes", "--prefix", prefix.string(), "--file",
                                     spec_file.string()});
      return command;
    case SpecFormat::kEnvironmentYaml:
      command.insert(command.end(), {"env", "create", "--yes", "--prefix", prefix.string(),
                                     "--file", spec_file.string()});
      return command;
    case SpecFormat::kCondaLock:
    case SpecFormat::kSrayLock: break;
  }
  auto pinned = PinnedPackages(spec_file);
  if (!pinned.ok()) return pinned.status();
  command.insert(command.end(), {"create", "--yes", "--prefix", prefix.string()});
  command.insert(command.end(), pinned->begin(), pinned->end());
  return command;
}

namespace {

// Asks the tool and what it started (its process group) to stop, as Ctrl-C
// would, then makes sure; reaps it.
void EndInterruptedTool(pid_t pid) {
  ::kill(-pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      ::kill(-pid, SIGKILL);  // what it started and left behind
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(-pid, SIGKILL);
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

// This process's environment with `entries` added, each replacing an
// entry of the same name.
std::vector<std::string> WithEntries(const std::vector<std::string>& entries) {
  std::set<std::string> replaced;
  for (const auto& entry : entries) replaced.insert(entry.substr(0, entry.find('=')));
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    if (replaced.count(std::string(text.substr(0, text.find('=')))) == 0) {
      environment.emplace_back(text);
    }
  }
  environment.insert(environment.end(), entries.begin(), entries.end());
  return environment;
}

}  // namespace

Status CreateEnvironment(const fs::path& tool, const fs::path& spec_file, const fs::path& prefix,
                         const std::optional<fs::path>& log_file, const CreateObserver& observer,
                         const Interrupted& interrupted,
                         const std::vector<std::string>& tool_environment) {
  auto spec = ReadSpec(spec_file);
  if (!spec.ok()) return spec.status();
  auto command = CreateCommand(tool, spec_file, prefix);
  if (!command.ok()) return command.status();
  std::vector<char*> argv;
  argv.reserve(command->size() + 1);
  for (auto& part : *command) argv.push_back(part.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (log_file) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log_file->c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  }
  // The tool does not inherit its caller's blocked signals (`sray run`
  // blocks INT and TERM for its signalfd), so that it can be ended; what the
  // caller ignores stays ignored (nohup). It runs in a process group of its
  // own, so that ending it (EndInterruptedTool) also ends what it started.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  std::vector<std::string> environment = WithEntries(tool_environment);
  std::vector<char*> envp;
  envp.reserve(environment.size() + 1);
  for (auto& entry : environment) envp.push_back(entry.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  const int spawn_error =
      ::posix_spawn(&pid, argv[0], &actions, &attributes, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (spawn_error != 0) return Status::FromErrno(spawn_error, "cannot start " + tool.string());
  int wait_status = 0;
  const auto started = std::chrono::steady_clock::now();
  // The first line after 2 s (most creations from a local cache end sooner),
  // then every 5 s: each walks the prefix, which may hold 50,000 files.
  auto next_told = started + std::chrono::seconds(2);
  const bool polling = observer || interrupted;
  for (;;) {
    const pid_t ended = ::waitpid(pid, &wait_status, polling ? WNOHANG : 0);
    if (ended == pid) break;
    if (ended < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "cannot wait for " + tool.string());
    }
    if (interrupted && interrupted()) {
      EndInterruptedTool(pid);
      return Status::Unavailable("creating " + prefix.string() + " with " +
                                 tool.filename().string() + " was interrupted");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto now = std::chrono::steady_clock::now();
    if (!observer || now < next_told) continue;  // polled for `interrupted` only
    next_told = now + std::chrono::seconds(5);
    const TreeSize size = MeasureTree(prefix);
    observer({.seconds = std::chrono::duration<double>(now - started).count(),
              .files = size.files,
              .bytes = size.bytes,
              .last_line = log_file ? LastLine(*log_file) : std::string()});
  }
  if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
    const std::string how = WIFEXITED(wait_status)
                                ? "exit status " + std::to_string(WEXITSTATUS(wait_status))
                                : "signal " + std::to_string(WTERMSIG(wait_status));
    return Status::Unavailable(tool.filename().string() + " could not create " + prefix.string() +
                               " from " + spec_file.string() + " (" + how + "): see " +
                               (log_file ? log_file->string() : std::string("its output above")));
  }
  auto installed = ReadPrefix(prefix);
  if (!installed.ok()) return installed.status().WithContext("after " + tool.filename().string());
  const auto differences = Compare(*spec, *installed);
  if (!differences.empty()) {
    std::string message = tool.filename().string() + " created " + prefix.string() +
                          ", but it does not match " + spec_file.string() + ":";
    for (const auto& line : Describe(differences)) message += "\n  " + line;
    return Status::Internal(message + "\nfix the spec or the channels it names");
  }
  return Status::Ok();
}

}  // namespace sray::envs
