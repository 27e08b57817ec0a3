#include "jobsetup/step_processes.h"

#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "common/process_stat.h"
#include "common/whole_number.h"

namespace sray::jobsetup {
std::vector<std::string> StepProcessMarkers(const std::filesystem::path& session_directory,
                                            std::uint32_t node_id) {
  return {"SRAY_SESSION_DIR=" + session_directory.string(),
          "SRAY_NODE_ID=" + std::to_string(node_id)};
}

namespace {

enum class EnvironmentState : std::uint8_t { kMatches, kOther, kEmpty };

// kEmpty: a live process shows no environment at all for a moment inside
// execve (its new memory is there, the environment not yet), so whether it
// belongs to the step cannot be told yet.
EnvironmentState ReadEnvironment(const std::filesystem::path& environ_file,
                                 const std::string& session_entry, const std::string& node_entry) {
  std::ifstream stream(environ_file, std::ios::binary);
  if (!stream) return EnvironmentState::kOther;
  bool session_found = false;
  bool node_found = false;
  bool any = false;
  std::string entry;
  while (std::getline(stream, entry, '\0')) {
    any = true;
    session_found = session_found || entry == session_entry;
    node_found = node_found || entry == node_entry;
    if (session_found && node_found) return EnvironmentState::kMatches;
  }
  return any ? EnvironmentState::kOther : EnvironmentState::kEmpty;
}

// A zombie has already released everything; only its parent can reap it.
bool IsAlive(pid_t pid) {
  const std::optional<ProcessStat> process = ReadProcessStat(pid);
  return process && process->state != 'Z';
}

// A live user process that may be inside execve: not a zombie and not a
// kernel thread (root's kernel threads have no environment either).
bool MayBeInsideExec(pid_t pid) {
  constexpr unsigned long kKernelThreadFlag = 0x00200000;  // PF_KTHREAD
  const std::optional<ProcessStat> process = ReadProcessStat(pid);
  return process && process->state != 'Z' && (process->flags & kKernelThreadFlag) == 0;
}

// Whether `pid` is, now, a live process of the step `selector` names.
bool IsStepProcess(pid_t pid, const StepProcessSelector& selector) {
  const std::filesystem::path directory = "/proc/" + std::to_string(pid);
  struct stat info {};
  if (::stat(directory.c_str(), &info) != 0 || info.st_uid != selector.uid) return false;
  const auto markers = StepProcessMarkers(selector.session_directory, selector.node_id);
  return ReadEnvironment(directory / "environ", markers[0], markers[1]) ==
             EnvironmentState::kMatches &&
         IsAlive(pid);
}

// The processes being ended, each held by a pidfd once found: its signals
// reach that process and no other, even after it exits and its pid goes to
// a new process (this runs as root: a pid alone could end any user's).
// Where no pidfd can be had (a kernel before Linux 5.3, a seccomp filter, no
// descriptors left), by pid as before.
class HeldProcesses {
 public:
  explicit HeldProcesses(const std::vector<StepProcessSelector>& selectors)
      : selectors_(selectors) {}
  ~HeldProcesses() {
    for (const auto& [pid, descriptor] : held_) {
      if (descriptor >= 0) ::close(descriptor);
    }
  }
  HeldProcesses(const HeldProcesses&) = delete;
  HeldProcesses& operator=(const HeldProcesses&) = delete;

  // Holds a process a scan found; false when it is gone or, by the time it
  // is held, no longer the step's (its pid was reused in between).
  bool Hold(pid_t pid) {
    if (auto found = held_.find(pid); found != held_.end()) {
      if (!Ended(pid)) return true;
      // The held process ended, and a scan found the pid again: another
      // process of the step took it.
      if (found->second >= 0) ::close(found->second);
      held_.erase(found);
    }
    // By number: glibc 2.36's <sys/pidfd.h> lacks extern "C" for C++.
    const int descriptor = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    // ESRCH: gone. Any other failure (no pidfds: ENOSYS; a seccomp filter's
    // EPERM; no descriptors left) falls back to the pid, as before: a
    // leftover must still be ended.
    if (descriptor < 0 && errno == ESRCH) return false;
    // Checked after the pidfd exists: if the pid changed hands before, the
    // new process is looked at; if after, the pidfd's process is gone.
    bool steps = false;
    for (const auto& selector : selectors_) steps = steps || IsStepProcess(pid, selector);
    if (!steps) {
      if (descriptor >= 0) ::close(descriptor);
      return false;
    }
    held_.emplace(pid, descriptor);
    return true;
  }

  void Signal(pid_t pid, int signal) const {
    const auto found = held_.find(pid);
    if (found == held_.end()) return;
    if (found->second >= 0) {
      (void)::syscall(SYS_pidfd_send_signal, found->second, signal, nullptr, 0);
    } else {
      ::kill(pid, signal);
    }
  }

  [[nodiscard]] bool Ended(pid_t pid) const {
    const auto found = held_.find(pid);
    if (found == held_.end()) return true;
    if (found->second < 0) return !IsAlive(pid);
    // Readable once the process has exited (a zombie counts: only its
    // parent can reap it, and it holds nothing).
    pollfd descriptor{.fd = found->second, .events = POLLIN, .revents = 0};
    return ::poll(&descriptor, 1, 0) > 0;
  }

 private:
  const std::vector<StepProcessSelector>& selectors_;
  std::map<pid_t, int> held_;  // pidfd, or -1 without pidfd support
};

}  // namespace

StepProcessScan ScanStepProcesses(const StepProcessSelector& selector) {
  const std::string session_entry = "SRAY_SESSION_DIR=" + selector.session_directory.string();
  const std::string node_entry = "SRAY_NODE_ID=" + std::to_string(selector.node_id);
  const pid_t self = getpid();
  StepProcessScan scan;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename().string();
    const std::optional<pid_t> parsed = WholeNumber<pid_t>(name);
    // Init is never a step's (and may run without an environment).
    if (!parsed || *parsed == self || *parsed == 1) continue;
    const pid_t pid = *parsed;
    struct stat info {};
    if (::stat(entry.path().c_str(), &info) != 0 || info.st_uid != selector.uid) continue;
    switch (ReadEnvironment(entry.path() / "environ", session_entry, node_entry)) {
      case EnvironmentState::kMatches:
        if (IsAlive(pid)) scan.matches.push_back(pid);
        break;
      case EnvironmentState::kEmpty:
        if (MayBeInsideExec(pid)) ++scan.undecided;
        break;
      case EnvironmentState::kOther: break;
    }
  }
  return scan;
}

std::vector<pid_t> FindStepProcesses(const StepProcessSelector& selector) {
  return ScanStepProcesses(selector).matches;
}

Result<std::size_t> EndStepProcesses(const StepProcessSelector& selector,
                                     std::chrono::milliseconds grace) {
  return EndStepProcesses(std::vector<StepProcessSelector>{selector}, grace);
}

Result<std::size_t> EndStepProcesses(const std::vector<StepProcessSelector>& selectors,
                                     std::chrono::milliseconds grace) {
  const auto scan_all = [&selectors] {
    StepProcessScan all;
    for (const auto& selector : selectors) {
      StepProcessScan one = ScanStepProcesses(selector);
      all.matches.insert(all.matches.end(), one.matches.begin(), one.matches.end());
      all.undecided += one.undecided;
    }
    return all;
  };
  const auto find_all = [&scan_all] { return scan_all().matches; };
  // A process caught inside execve shows an empty environment for a moment,
  // so one scan can miss a child its task started just before exiting (seen
  // as a step whose output pipe stayed open until Slurm gave up after 60 s).
  // Three scans 20 ms apart close that window; they are needed only when the
  // first one saw a process of the step (it may still be forking) or a
  // process of the user it could not place. A step that ended cleanly costs
  // one scan.
  HeldProcesses held(selectors);
  std::set<pid_t> seen;
  for (int scan = 0; scan < 3; ++scan) {
    const StepProcessScan found = scan_all();
    for (const pid_t pid : found.matches) {
      if (!seen.contains(pid) && held.Hold(pid)) {
        seen.insert(pid);
        held.Signal(pid, SIGTERM);
      }
    }
    if (scan == 0 && found.matches.empty() && found.undecided == 0) break;
    if (scan < 2) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::vector<pid_t> remaining(seen.begin(), seen.end());
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (!remaining.empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::erase_if(remaining, [&held](pid_t pid) { return held.Ended(pid); });
  }
  for (const pid_t pid : remaining) held.Signal(pid, SIGKILL);
  // A process may fork between a scan and its kill; scan again until a pass
  // finds nothing (a fork bomb outlasting this is left to Slurm).
  for (int pass = 0; pass < 5; ++pass) {
    const std::vector<pid_t> late = find_all();
    if (late.empty()) break;
    for (const pid_t pid : late) {
      if (held.Hold(pid)) held.Signal(pid, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return seen.size();
}

}  // namespace sray::jobsetup
