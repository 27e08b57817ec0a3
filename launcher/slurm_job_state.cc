#include "slurm_job_state.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdlib>
#include <optional>
#include <sstream>

#include "common/executable_search.h"
#include "common/file_descriptor.h"

extern char** environ;

namespace sray::launcher {
namespace {

bool IsSlurmJobId(const std::string& job_id) {
  return !job_id.empty() && job_id.size() <= 20 &&
         std::all_of(job_id.begin(), job_id.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

SlurmJobState ReadSqueueAnswer(const std::vector<std::string>& states, int status,
                               std::string_view errors) {
  if (status != 0) {
    // Past MinJobAge the controller forgets a job; any other failure (the
    // controller unreachable) says nothing about the job.
    return errors.find("Invalid job id") != std::string_view::npos ? SlurmJobState::kEnded
                                                                   : SlurmJobState::kUnknown;
  }
  // squeue lists only jobs that have not finished unless asked for more.
  for (const std::string& state : states) {
    if (!state.empty()) return SlurmJobState::kRuns;
  }
  return SlurmJobState::kEnded;
}

namespace {

// What a command printed and how it ended; nothing when it could not be
// started, did not end within `limit` (then killed), or was not waited for.
struct CommandAnswer {
  int status = 0;
  std::string output;
  std::string errors;
};

std::optional<CommandAnswer> RunAndRead(const std::string& program_name,
                                        std::vector<std::string> arguments,
                                        std::chrono::milliseconds limit) {
  const char* path = std::getenv("PATH");
  const auto program = FindExecutableOnPath(program_name, path != nullptr ? path : "/usr/bin:/bin");
  if (!program) return std::nullopt;
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0) return std::nullopt;
  FileDescriptor out_read(out[0]);
  FileDescriptor out_write(out[1]);
  if (::pipe2(err, O_CLOEXEC) != 0) return std::nullopt;
  FileDescriptor err_read(err[0]);
  FileDescriptor err_write(err[1]);
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_adddup2(&actions, out_write.get(), STDOUT_FILENO);
  ::posix_spawn_file_actions_adddup2(&actions, err_write.get(), STDERR_FILENO);
  ::posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::string program_path = program->string();
  std::vector<char*> argv = {program_path.data()};
  for (std::string& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int spawned =
      ::posix_spawn(&pid, program_path.c_str(), &actions, nullptr, argv.data(), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  out_write = FileDescriptor(-1);
  err_write = FileDescriptor(-1);
  if (spawned != 0) return std::nullopt;

  CommandAnswer answer;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  bool timed_out = false;
  while (out_read.get() >= 0 || err_read.get() >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    std::array<pollfd, 2> waits = {pollfd{.fd = out_read.get(), .events = POLLIN, .revents = 0},
                                   pollfd{.fd = err_read.get(), .events = POLLIN, .revents = 0}};
    const int ready = ::poll(waits.data(), waits.size(), static_cast<int>(left.count()));
    if (ready < 0 && errno != EINTR) {
      timed_out = true;  // no answer to trust, and squeue must not be waited for
      break;
    }
    for (std::size_t index = 0; index < waits.size(); ++index) {
      if (waits[index].revents == 0) continue;
      FileDescriptor& source = index == 0 ? out_read : err_read;
      std::string& text = index == 0 ? answer.output : answer.errors;
      char buffer[4096];
      const ssize_t got = ::read(source.get(), buffer, sizeof(buffer));
      if (got > 0 && text.size() < (64u << 10)) text.append(buffer, static_cast<std::size_t>(got));
      if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) source = FileDescriptor(-1);
    }
  }
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  pid_t reaped = -1;
  do {
    reaped = ::waitpid(pid, &status, 0);
  } while (reaped < 0 && errno == EINTR);
  // A failed wait (SIGCHLD ignored by whoever started sray: ECHILD) leaves
  // no exit status to read an "ended" from.
  if (reaped != pid || timed_out || !WIFEXITED(status)) return std::nullopt;
  answer.status = WEXITSTATUS(status);
  return answer;
}

// This machine's cluster as its Slurm configuration names it; empty when
// unknown.
std::string LocalClusterName(std::chrono::milliseconds limit) {
  const auto answer = RunAndRead("scontrol", {"show", "config"}, limit);
  if (!answer || answer->status != 0) return {};
  std::istringstream lines(answer->output);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("ClusterName ")) continue;
    const auto equals = line.find('=');
    if (equals == std::string::npos) return {};
    const auto first = line.find_first_not_of(' ', equals + 1);
    return first == std::string::npos ? std::string() : line.substr(first);
  }
  return {};
}

}  // namespace

SlurmJobState AskSlurmAbout(const std::string& job_id, const std::string& cluster,
                            std::chrono::milliseconds limit) {
  if (!IsSlurmJobId(job_id)) return SlurmJobState::kUnknown;
  const auto answer =
      RunAndRead("squeue", {"--noheader", "--jobs=" + job_id, "--format=%T"}, limit);
  if (!answer) return SlurmJobState::kUnknown;
  std::vector<std::string> states;
  std::istringstream lines(answer->output);
  for (std::string line; std::getline(lines, line);) states.push_back(line);
  const SlurmJobState state = ReadSqueueAnswer(states, answer->status, answer->errors);
  // A home shared by several clusters: this controller's "ended" may be
  // about another cluster's job of the same number.
  if (state == SlurmJobState::kEnded && !cluster.empty() && LocalClusterName(limit) != cluster) {
    return SlurmJobState::kUnknown;
  }
  return state;
}

}  // namespace sray::launcher
