#include "job_janitor.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "dashboard/jobs_file.h"
#include "jobsetup/node_setup_codec.h"
#include "jobsetup/step_processes.h"

namespace sray::launcher {
namespace {

// What the job's processes get between SIGTERM and SIGKILL: short, since the
// whole cleanup should be over within five seconds of the launcher's death.
constexpr std::chrono::milliseconds kJanitorGrace{2000};

constexpr char kNode = 'n';
constexpr char kDirectory = 'd';
constexpr char kJobsFile = 'j';
constexpr char kDismissed = 'x';

bool ReadExactly(int descriptor, void* buffer, std::size_t size) {
  auto* cursor = static_cast<char*>(buffer);
  while (size > 0) {
    const ssize_t got = ::read(descriptor, cursor, size);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    cursor += got;
    size -= static_cast<std::size_t>(got);
  }
  return true;
}

void WriteToStderr(std::string_view text) {
  while (!text.empty()) {
    const ssize_t written = ::write(STDERR_FILENO, text.data(), text.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;
    text.remove_prefix(static_cast<std::size_t>(written));
  }
}

// Splits "a\0b\0c" into its parts.
std::vector<std::string> Fields(std::string_view payload) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  for (;;) {
    const auto end = payload.find('\0', start);
    fields.emplace_back(payload.substr(start, end - start));
    if (end == std::string_view::npos) return fields;
    start = end + 1;
  }
}

}  // namespace

Result<JobJanitor> JobJanitor::Start() {
  int ends[2] = {-1, -1};
  if (::pipe2(ends, O_CLOEXEC) != 0) return Status::FromErrno(errno, "cannot create a pipe");
  const pid_t launcher = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int fork_error = errno;
    ::close(ends[0]);
    ::close(ends[1]);
    return Status::FromErrno(fork_error, "cannot start the job's janitor process");
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    (void)::prctl(PR_SET_NAME, "sray-janitor");
    ::close(ends[1]);
    // Above the standard streams, which are replaced next (a launcher
    // started with stdin closed gets a pipe on descriptor 0).
    int read_end = ends[0];
    if (read_end <= STDERR_FILENO) read_end = ::fcntl(read_end, F_DUPFD, STDERR_FILENO + 1);
    if (read_end < 0) ::_exit(2);
    // It holds nothing of the launcher's: a reader of the job's output sees
    // its end when the launcher and the ranks are gone.
    if (const int null = ::open("/dev/null", O_RDWR); null >= 0) {
      ::dup2(null, STDIN_FILENO);
      ::dup2(null, STDOUT_FILENO);
      if (null > STDERR_FILENO) ::close(null);
    }
    if (read_end > 3) ::close_range(3, static_cast<unsigned>(read_end) - 1, 0);
    ::close_range(static_cast<unsigned>(read_end) + 1, UINT_MAX, 0);
    const bool cleaned = RunJanitor(read_end, launcher);
    ::_exit(cleaned ? 1 : 0);
  }
  ::close(ends[0]);
  return JobJanitor(pid, ends[1]);
}

JobJanitor::JobJanitor(JobJanitor&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)), pipe_(std::exchange(other.pipe_, -1)) {}

JobJanitor::~JobJanitor() {
  if (pipe_ >= 0) ::close(pipe_);
}

void JobJanitor::Send(char kind, std::string_view payload) {
  if (pipe_ < 0) return;
  std::string record(1, kind);
  const auto size = static_cast<std::uint32_t>(payload.size());
  record.append(reinterpret_cast<const char*>(&size), sizeof(size));
  record.append(payload);
  std::string_view rest = record;
  while (!rest.empty()) {
    const ssize_t written = ::write(pipe_, rest.data(), rest.size());
    if (written < 0 && errno == EINTR) continue;
    // A janitor that is gone cannot be told; the launcher cleans up itself.
    if (written <= 0) return;
    rest.remove_prefix(static_cast<std::size_t>(written));
  }
}

void JobJanitor::WatchNode(const jobsetup::NodeSetup& node) {
  Send(kNode, jobsetup::EncodeNodeSetupResult(node));
}

void JobJanitor::WatchDirectory(const std::filesystem::path& directory) {
  Send(kDirectory, directory.string());
}

void JobJanitor::WatchJobsFile(const std::filesystem::path& home, const std::string& job_id,
                               const std::string& step_id) {
  Send(kJobsFile, home.string() + '\0' + job_id + '\0' + step_id);
}

void JobJanitor::Dismiss() {
  if (pipe_ < 0) return;
  Send(kDismissed, {});
  ::close(pipe_);
  pipe_ = -1;
  // The launcher may have reaped it already (its SIGCHLD handling reaps
  // any child); then there is nothing to wait for.
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
  pid_ = -1;
}

bool RunJanitor(int descriptor, pid_t launcher) {
  std::vector<jobsetup::NodeSetup> nodes;
  std::vector<std::filesystem::path> directories;
  std::optional<std::vector<std::string>> jobs_file;
  for (;;) {
    char kind = 0;
    std::uint32_t size = 0;
    if (!ReadExactly(descriptor, &kind, 1)) break;
    if (kind == kDismissed) return false;
    if (!ReadExactly(descriptor, &size, sizeof(size))) break;
    std::string payload(size, '\0');
    if (!ReadExactly(descriptor, payload.data(), size)) break;
    if (kind == kNode) {
      auto node = jobsetup::DecodeNodeSetupResult(payload);
      if (node.ok()) nodes.push_back(std::move(node).value());
    } else if (kind == kDirectory) {
      directories.emplace_back(payload);
    } else if (kind == kJobsFile) {
      auto fields = Fields(payload);
      if (fields.size() == 3) jobs_file = std::move(fields);
    }
  }
  // The pipe closed without a dismissal: the launcher is dead.
  std::vector<jobsetup::StepProcessSelector> selectors;
  for (const auto& node : nodes) {
    selectors.push_back({.uid = ::getuid(),
                         .session_directory = node.session_directory,
                         .node_id = node.environment.node_id});
  }
  const auto ended = jobsetup::EndStepProcesses(selectors, kJanitorGrace);
  for (const auto& node : nodes) {
    dashboard::RemoveNotedJobsFile(node.session_directory, node.environment.job_id,
                                   node.environment.step_id);
    (void)jobsetup::TeardownNode(node);
  }
  for (const auto& directory : directories) {
    std::error_code ignored;
    std::filesystem::remove_all(directory, ignored);
  }
  if (jobs_file) dashboard::RemoveJobsFile((*jobs_file)[0], (*jobs_file)[1], (*jobs_file)[2]);
  const std::string job =
      nodes.empty() ? std::string("its job") : "job " + nodes.front().environment.job_id;
  WriteToStderr("sray: the launcher (pid " + std::to_string(launcher) + ") died without ending " +
                job + ": ended " + std::to_string(ended.ok() ? *ended : 0) +
                " process(es) and removed the job's files\n");
  return true;
}

}  // namespace sray::launcher
