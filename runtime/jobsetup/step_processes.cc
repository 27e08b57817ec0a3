#include "jobsetup/step_processes.h"

#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "common/whole_number.h"

namespace sray::jobsetup {
namespace {

bool EnvironmentMatches(const std::filesystem::path& environ_file, const std::string& session_entry,
                        const std::string& node_entry) {
  std::ifstream stream(environ_file, std::ios::binary);
  if (!stream) return false;
  bool session_found = false;
  bool node_found = false;
  std::string entry;
  while (std::getline(stream, entry, '\0')) {
    session_found = session_found || entry == session_entry;
    node_found = node_found || entry == node_entry;
    if (session_found && node_found) return true;
  }
  return false;
}

bool IsAlive(pid_t pid) {
  // A zombie has already released everything; only its parent can reap it.
  std::ifstream stat_file("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat_file, line)) return false;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

}  // namespace

std::vector<pid_t> FindStepProcesses(const StepProcessSelector& selector) {
  const std::string session_entry = "SRAY_SESSION_DIR=" + selector.session_directory.string();
  const std::string node_entry = "SRAY_NODE_ID=" + std::to_string(selector.node_id);
  const pid_t self = getpid();
  std::vector<pid_t> matches;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename().string();
    const std::optional<pid_t> parsed = WholeNumber<pid_t>(name);
    if (!parsed || *parsed == self) continue;
    const pid_t pid = *parsed;
    struct stat info {};
    if (::stat(entry.path().c_str(), &info) != 0 || info.st_uid != selector.uid) continue;
    if (EnvironmentMatches(entry.path() / "environ", session_entry, node_entry) && IsAlive(pid)) {
      matches.push_back(pid);
    }
  }
  return matches;
}

Result<std::size_t> EndStepProcesses(const StepProcessSelector& selector,
                                     std::chrono::milliseconds grace) {
  return EndStepProcesses(std::vector<StepProcessSelector>{selector}, grace);
}

Result<std::size_t> EndStepProcesses(const std::vector<StepProcessSelector>& selectors,
                                     std::chrono::milliseconds grace) {
  const auto find_all = [&selectors] {
    std::vector<pid_t> found;
    for (const auto& selector : selectors) {
      for (const pid_t pid : FindStepProcesses(selector)) found.push_back(pid);
    }
    return found;
  };
  // A process caught between fork and exec shows an empty environment for a
  // moment, so one scan can miss a child its task started just before exiting
  // (seen as a step whose output pipe stayed open until Slurm gave up after
  // 60 s). Three scans 20 ms apart close that window.
  std::set<pid_t> seen;
  for (int scan = 0; scan < 3; ++scan) {
    for (const pid_t pid : find_all()) {
      if (seen.insert(pid).second) ::kill(pid, SIGTERM);
    }
    if (scan < 2) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::vector<pid_t> remaining(seen.begin(), seen.end());
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (!remaining.empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::erase_if(remaining, [](pid_t pid) { return !IsAlive(pid); });
  }
  for (const pid_t pid : remaining) ::kill(pid, SIGKILL);
  // A process may fork between a scan and its kill; scan again until a pass
  // finds nothing (a fork bomb outlasting this is left to Slurm).
  for (int pass = 0; pass < 5; ++pass) {
    const std::vector<pid_t> late = find_all();
    if (late.empty()) break;
    for (const pid_t pid : late) ::kill(pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return seen.size();
}

}  // namespace sray::jobsetup
