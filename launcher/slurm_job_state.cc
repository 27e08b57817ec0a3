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

SlurmJobState AskSlurmAbout(const std::string& job_id, std::chrono::milliseconds limit) {
  if (!IsSlurmJobId(job_id)) return SlurmJobState::kUnknown;
  const char* path = std::getenv("PATH");
  const auto squeue = FindExecutableOnPath("squeue", path != nullptr ? path : "/usr/bin:/bin");
  if (!squeue) return SlurmJobState::kUnknown;
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0) return SlurmJobState::kUnknown;
  FileDescriptor out_read(out[0]);
  FileDescriptor out_write(out[1]);
  if (::pipe2(err, O_CLOEXEC) != 0) return SlurmJobState::kUnknown;
  FileDescriptor err_read(err[0]);
  FileDescriptor err_write(err[1]);
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_adddup2(&actions, out_write.get(), STDOUT_FILENO);
  ::posix_spawn_file_actions_adddup2(&actions, err_write.get(), STDERR_FILENO);
  ::posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::string program = squeue->string();
  std::string jobs = "--jobs=" + job_id;
  std::array<char*, 6> argv = {program.data(), const_cast<char*>("--noheader"),
                               jobs.data(),    const_cast<char*>("--format=%T"),
                               nullptr,        nullptr};
  pid_t pid = -1;
  const int spawned = ::posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  out_write = FileDescriptor(-1);
  err_write = FileDescriptor(-1);
  if (spawned != 0) return SlurmJobState::kUnknown;

  std::string output;
  std::string errors;
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
    if (ready < 0 && errno != EINTR) break;
    for (std::size_t index = 0; index < waits.size(); ++index) {
      if (waits[index].revents == 0) continue;
      FileDescriptor& source = index == 0 ? out_read : err_read;
      std::string& text = index == 0 ? output : errors;
      char buffer[4096];
      const ssize_t got = ::read(source.get(), buffer, sizeof(buffer));
      if (got > 0 && text.size() < (64u << 10)) text.append(buffer, static_cast<std::size_t>(got));
      if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) source = FileDescriptor(-1);
    }
  }
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out || !WIFEXITED(status)) return SlurmJobState::kUnknown;
  std::vector<std::string> states;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) states.push_back(line);
  return ReadSqueueAnswer(states, WEXITSTATUS(status), errors);
}

}  // namespace sray::launcher
