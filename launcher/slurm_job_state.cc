#include "slurm_job_state.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <sstream>

#include "common/captured_command.h"
#include "common/executable_search.h"

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
  arguments.insert(arguments.begin(), program->string());
  const auto ran = RunCapturing({.argv = std::move(arguments),
                                 .environment = std::nullopt,
                                 .capture_errors = true,
                                 .no_input = true,
                                 .limit = limit,
                                 .most_bytes = 64 << 10});
  // A failed wait (SIGCHLD ignored by whoever started sray: ECHILD) leaves
  // no exit status to read an "ended" from.
  if (!ran.ok() || ran->timed_out || !WIFEXITED(ran->wait_status)) return std::nullopt;
  return CommandAnswer{
      .status = WEXITSTATUS(ran->wait_status), .output = ran->output, .errors = ran->errors};
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
