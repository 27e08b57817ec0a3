#include "slurm_job_state.h"

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <set>
#include <sstream>

#include "common/captured_command.h"
#include "common/executable_search.h"

extern char** environ;

namespace sray::launcher {
namespace {

bool IsSlurmJobId(const std::string& job_id) {
  return !job_id.empty() && job_id.size() <= 20 &&
         std::all_of(job_id.begin(), job_id.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::map<std::string, SlurmJobState> ReadSqueueAnswer(const std::vector<std::string>& asked,
                                                      const std::vector<std::string>& lines,
                                                      int status, std::string_view errors) {
  std::map<std::string, SlurmJobState> states;
  if (status != 0) {
    const bool forgotten =
        asked.size() == 1 && errors.find("Invalid job id") != std::string_view::npos;
    for (const std::string& job : asked) {
      states[job] = forgotten ? SlurmJobState::kEnded : SlurmJobState::kUnknown;
    }
    return states;
  }
  // Asked by id, squeue lists a job in any state until the controller
  // forgets it (MinJobAge): one in a final state has ended, as has one it
  // leaves out. A head node that crashed gives NODE_FAIL.
  static const std::set<std::string, std::less<>> kFinal = {
      "BOOT_FAIL", "CANCELLED", "COMPLETED",     "DEADLINE", "FAILED",
      "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "TIMEOUT"};
  for (const std::string& job : asked) states[job] = SlurmJobState::kEnded;
  for (const std::string& line : lines) {
    std::istringstream words(line);
    std::string job;
    std::string state;
    if (!(words >> job >> state)) continue;
    auto found = states.find(job);
    if (found == states.end()) continue;
    // Running if any of its lines says so (several lines of one id: the
    // elements of a job array).
    if (!kFinal.contains(state)) found->second = SlurmJobState::kRuns;
  }
  return states;
}

namespace {

// What a command printed and how it ended; nothing when it could not be
// started, did not end within `limit` (then killed), or was not waited for.
struct CommandAnswer {
  int status = 0;
  std::string output;
  std::string errors;
};

// This process's environment without what makes squeue leave jobs out of
// its list (SQUEUE_STATES, SQUEUE_PARTITION, SQUEUE_USERS, ... and
// SLURM_CLUSTERS): a running job it hid would read as ended.
std::vector<std::string> UnfilteredEnvironment() {
  std::vector<std::string> variables;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view variable(*entry);
    if (variable.starts_with("SQUEUE_") || variable.starts_with("SLURM_CLUSTERS=")) continue;
    variables.emplace_back(variable);
  }
  return variables;
}

std::optional<CommandAnswer> RunAndRead(const std::string& program_name,
                                        std::vector<std::string> arguments,
                                        std::chrono::milliseconds limit) {
  const char* path = std::getenv("PATH");
  const auto program = FindExecutableOnPath(program_name, path != nullptr ? path : "/usr/bin:/bin");
  if (!program) return std::nullopt;
  arguments.insert(arguments.begin(), program->string());
  const auto ran = RunCapturing({.argv = std::move(arguments),
                                 .environment = UnfilteredEnvironment(),
                                 .capture_errors = true,
                                 .no_input = true,
                                 .limit = limit,
                                 .most_bytes = std::size_t{4} << 20});
  // A failed wait (SIGCHLD ignored by whoever started sray: ECHILD) leaves
  // no exit status to read an "ended" from; an answer cut at the bound
  // could leave a running job out of the list.
  if (!ran.ok() || ran->timed_out || ran->cut_short || !WIFEXITED(ran->wait_status))
    return std::nullopt;
  return CommandAnswer{
      .status = WEXITSTATUS(ran->wait_status), .output = ran->output, .errors = ran->errors};
}

}  // namespace

std::string LocalSlurmClusterName(std::chrono::milliseconds limit) {
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

std::map<std::string, SlurmJobState> AskSlurmAbout(const std::vector<std::string>& job_ids,
                                                   std::chrono::milliseconds limit) {
  std::map<std::string, SlurmJobState> states;
  std::vector<std::string> asked;
  std::string list;
  for (const std::string& job : job_ids) {
    if (states.contains(job)) continue;
    states[job] = SlurmJobState::kUnknown;
    if (!IsSlurmJobId(job)) continue;
    asked.push_back(job);
    list += (list.empty() ? "" : ",") + job;
  }
  if (asked.empty()) return states;
  // %A: the job's own id, also for an element of a job array (%i would say
  // BASE_INDEX), as SLURM_JOB_ID and so the jobs file name it.
  const auto answer =
      RunAndRead("squeue", {"--noheader", "--jobs=" + list, "--format=%A %T"}, limit);
  if (!answer) return states;
  std::vector<std::string> lines;
  std::istringstream text(answer->output);
  for (std::string line; std::getline(text, line);) lines.push_back(line);
  for (auto& [job, state] : ReadSqueueAnswer(asked, lines, answer->status, answer->errors)) {
    states[job] = state;
  }
  return states;
}

}  // namespace sray::launcher
