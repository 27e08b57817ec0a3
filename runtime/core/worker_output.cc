#include "core/worker_output.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <string_view>
#include <vector>

#include "common/private_file.h"
#include "common/thread_name.h"
#include "common/worker_log_files.h"

namespace sray::core {
namespace {

void WriteAll(int descriptor, std::string_view text) {
  while (!text.empty()) {
    const ssize_t written = ::write(descriptor, text.data(), text.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return;
    }
    text.remove_prefix(static_cast<std::size_t>(written));
  }
}

// A line longer than this is cut into pieces (a binary blob printed by
// mistake must not grow the buffer without bound).
constexpr std::size_t kLongestLine = 64 * 1024;

// UCX prints some 20 frames; a report that has not ended after this many
// lines is not one, and what follows reaches the job's output again.
constexpr int kLongestCrashReport = 200;

// UCX's fatal lines start with "[host:pid:thread:tid] "; the report's first
// one is "[...] Caught signal 11 (Segmentation fault: ...)". Returns what
// follows "Caught signal ", or nothing for any other line.
std::optional<std::string_view> UcxCaughtSignal(std::string_view line) {
  constexpr std::string_view kCaught = "] Caught signal ";
  if (!line.starts_with('[')) return std::nullopt;
  const auto found = line.find(kCaught);
  if (found == std::string_view::npos) return std::nullopt;
  return line.substr(found + kCaught.size());
}

// The backtrace is framed by "==== backtrace (tid: N) ====" and a line of
// '=' only.
bool StartsUcxBacktrace(std::string_view line) {
  return line.starts_with("==== backtrace");
}
bool EndsUcxBacktrace(std::string_view line) {
  return line.size() >= 10 && line.find_first_not_of('=') == std::string_view::npos;
}

}  // namespace

Result<std::unique_ptr<WorkerOutput>> WorkerOutput::Start(Options options) {
  // What workers print may be private: a directory of the job user alone.
  if (Status created = CreatePrivateDirectoryIn(options.directory, ::getuid(), "worker log directory");
      !created.ok()) {
    return created;
  }
  const int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) return Status::FromErrno(errno, "eventfd for the worker output reader");
  return std::unique_ptr<WorkerOutput>(new WorkerOutput(std::move(options), wake));
}

WorkerOutput::WorkerOutput(Options options, int wake_fd)
    : options_(std::move(options)), wake_fd_(wake_fd) {
  reader_ = std::thread([this] {
    NameThisThread("sray-output");
    Read();
  });
}

WorkerOutput::~WorkerOutput() {
  stopping_.store(true);
  const std::uint64_t one = 1;
  [[maybe_unused]] auto written = ::write(wake_fd_, &one, sizeof(one));
  reader_.join();
  std::lock_guard lock(mutex_);
  for (auto& [descriptor, stream] : streams_) ::close(descriptor);
  for (auto& [rank, worker] : workers_) {
    if (worker.file >= 0) ::close(worker.file);
  }
  ::close(wake_fd_);
}

std::filesystem::path WorkerOutput::LogPath(std::uint32_t rank) const {
  return WorkerLogPath(options_.directory, rank);
}

Result<WorkerOutput::Pipes> WorkerOutput::Open(std::uint32_t rank) {
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe for a worker's output");
  if (::pipe2(err, O_CLOEXEC) != 0) {
    const int pipe_error = errno;
    ::close(out[0]);
    ::close(out[1]);
    return Status::FromErrno(pipe_error, "pipe for a worker's errors");
  }
  const int file = ::open(LogPath(rank).c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  {
    std::lock_guard lock(mutex_);
    streams_[out[0]] = Stream{.rank = rank, .is_stderr = false, .partial = {}};
    streams_[err[0]] = Stream{.rank = rank, .is_stderr = true, .partial = {}};
    Worker& worker = workers_[rank];
    if (worker.file >= 0) ::close(worker.file);
    worker = Worker{.pid = 0, .started = false, .file = file, .written = 0, .open_streams = 2};
  }
  const std::uint64_t one = 1;
  [[maybe_unused]] auto written = ::write(wake_fd_, &one, sizeof(one));
  return Pipes{.stdout_fd = out[1], .stderr_fd = err[1]};
}

void WorkerOutput::Started(std::uint32_t rank, const Pipes& pipes, pid_t pid) {
  ::close(pipes.stdout_fd);
  ::close(pipes.stderr_fd);
  {
    std::lock_guard lock(mutex_);
    auto found = workers_.find(rank);
    if (found != workers_.end()) {
      found->second.pid = pid;
      found->second.started = true;
    }
  }
  const std::uint64_t one = 1;
  [[maybe_unused]] auto written = ::write(wake_fd_, &one, sizeof(one));
}

void WorkerOutput::Read() {
  std::vector<char> buffer(64 * 1024);
  while (true) {
    std::vector<pollfd> watched;
    {
      std::lock_guard lock(mutex_);
      watched.reserve(streams_.size() + 1);
      watched.push_back({.fd = wake_fd_, .events = POLLIN, .revents = 0});
      for (const auto& [descriptor, stream] : streams_) {
        auto worker = workers_.find(stream.rank);
        if (worker != workers_.end() && !worker->second.started) continue;
        watched.push_back({.fd = descriptor, .events = POLLIN, .revents = 0});
      }
    }
    // Stopping: take what is readable now, without waiting for more.
    const bool last_round = stopping_.load();
    const int ready = ::poll(watched.data(), watched.size(), last_round ? 0 : -1);
    if (ready < 0 && errno != EINTR) return;
    if (watched[0].revents != 0) {
      std::uint64_t count = 0;
      [[maybe_unused]] auto drained = ::read(wake_fd_, &count, sizeof(count));
    }
    for (std::size_t index = 1; index < watched.size(); ++index) {
      if (watched[index].revents == 0) continue;
      const int descriptor = watched[index].fd;
      const ssize_t got = ::read(descriptor, buffer.data(), buffer.size());
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      HandleRead(descriptor,
                 std::string_view(buffer.data(), got > 0 ? static_cast<std::size_t>(got) : 0),
                 got <= 0);
      // Written without the lock: a slow reader of the job's output (a
      // paused pager, a slow link) must not hold up Open, which runs on
      // the node manager's transport thread.
      for (auto& [target, text] : driver_lines_) WriteAll(target, text);
      driver_lines_.clear();
    }
    // Stopping: again until nothing more is readable (EOF comes after the
    // last data, in a read of its own).
    if (last_round && ready <= 0) return;
  }
}

void WorkerOutput::HandleRead(int descriptor, std::string_view data, bool ended) {
  std::lock_guard lock(mutex_);
  {
    auto found = streams_.find(descriptor);
    if (found == streams_.end()) return;
    Stream& stream = found->second;
    if (ended) {
      if (!stream.partial.empty()) Line(stream, stream.partial);
      const std::uint32_t rank = stream.rank;
      streams_.erase(found);
      ::close(descriptor);
      auto worker = workers_.find(rank);
      if (worker != workers_.end() && --worker->second.open_streams == 0) {
        if (worker->second.file >= 0) ::close(worker->second.file);
        workers_.erase(worker);
      }
      return;
    }
    while (!data.empty()) {
      const auto end = data.find('\n');
      if (end == std::string_view::npos) {
        stream.partial.append(data);
        if (stream.partial.size() >= kLongestLine) {
          Line(stream, stream.partial);
          stream.partial.clear();
        }
        break;
      }
      if (stream.partial.empty()) {
        Line(stream, data.substr(0, end));
      } else {
        stream.partial.append(data.substr(0, end));
        Line(stream, stream.partial);
        stream.partial.clear();
      }
      data.remove_prefix(end + 1);
    }
  }
}

void WorkerOutput::Line(Stream& stream, std::string_view line) {
  auto found = workers_.find(stream.rank);
  if (found == workers_.end()) return;
  Worker& worker = found->second;
  std::string text(line);
  text += '\n';
  WriteToFile(worker, stream.rank, text);
  if (!options_.to_driver) return;
  if (KeepInLogOnly(stream, worker, line)) return;
  const std::string prefix = "(node " + std::to_string(options_.node_id) + " worker " +
                             std::to_string(stream.rank) + " pid " + std::to_string(worker.pid) +
                             ") ";
  driver_lines_.emplace_back(stream.is_stderr ? options_.driver_stderr : options_.driver_stdout,
                             prefix + text);
}

bool WorkerOutput::KeepInLogOnly(Stream& stream, const Worker& worker, std::string_view line) {
  if (!stream.is_stderr) return false;
  if (stream.in_crash_report) {
    if (++stream.crash_report_lines > kLongestCrashReport) {
      stream.in_crash_report = false;
      return false;
    }
    if (StartsUcxBacktrace(line)) {
      stream.crash_backtrace_started = true;
    } else if (stream.crash_backtrace_started && EndsUcxBacktrace(line)) {
      stream.in_crash_report = false;
      stream.crash_backtrace_started = false;
    }
    return true;
  }
  const auto caught = UcxCaughtSignal(line);
  if (!caught) return false;
  stream.in_crash_report = true;
  stream.crash_backtrace_started = false;
  stream.crash_report_lines = 0;
  driver_lines_.emplace_back(
      options_.driver_stderr,
      "sray: worker " + std::to_string(stream.rank) + " (pid " + std::to_string(worker.pid) +
          ") on node " + std::to_string(options_.node_id) + " crashed: caught signal " +
          std::string(*caught) + "; its backtrace is in " + LogPath(stream.rank).string() +
          (options_.kept_in.empty()
               ? " while the job runs (`sray logs --worker " + std::to_string(stream.rank) +
                     "`; --ray-cluster=log_dir=DIR keeps the logs after the job)"
               : ", copied to " + (options_.kept_in / LogPath(stream.rank).filename()).string() +
                     " when the job ends") +
          "\n");
  return true;
}

void WorkerOutput::WriteToFile(Worker& worker, std::uint32_t rank, std::string_view text) {
  if (worker.file < 0) return;
  if (worker.written + text.size() > options_.file_limit) {
    // One older file is kept: the newest lines are always in the log.
    ::close(worker.file);
    const auto path = LogPath(rank);
    std::error_code ignored;
    std::filesystem::rename(path, path.string() + ".1", ignored);
    worker.file = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    worker.written = 0;
    if (worker.file < 0) return;
  }
  WriteAll(worker.file, text);
  worker.written += text.size();
}

}  // namespace sray::core
