#include "job_user_process.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <thread>

#include "common/file_descriptor.h"

namespace sray::spank {
namespace {

// Each slot holds a descriptor plus one; 0 is a free slot (so the array
// needs no initialiser).
std::array<std::atomic<int>, kMostKeptOut> kept_out{};

// Exit statuses of the child that say where it stopped.
constexpr int kCannotBecomeUser = 125;
constexpr int kWorkThrew = 126;
constexpr int kCannotAnswer = 127;

bool WriteAll(int fd, const std::string& bytes) {
  std::size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t result = write(fd, bytes.data() + written, bytes.size() - written);
    if (result < 0 && errno == EINTR) continue;
    if (result <= 0) return false;
    written += static_cast<std::size_t>(result);
  }
  return true;
}

[[noreturn]] void RunChild(const JobUser& user, const JobUserWork& work, int answer_fd,
                           int told_fd) {
  for (const auto& slot : kept_out) {
    if (const int kept = slot.load(); kept > 0) close(kept - 1);
  }
  // A process that already is the user (not root) could not call setgroups.
  const bool already_user = getuid() == user.uid && geteuid() == user.uid && getgid() == user.gid &&
                            getegid() == user.gid;
  const bool became_user =
      already_user || (setgroups(user.groups.size(), user.groups.data()) == 0 &&
                       setgid(user.gid) == 0 && setuid(user.uid) == 0);
  if (!became_user) _exit(kCannotBecomeUser);
  // Each told text: its length (4 bytes, this machine's order), then it.
  const TellCaller tell = [told_fd](const std::string& text) {
    const auto length = static_cast<std::uint32_t>(text.size());
    std::string framed(reinterpret_cast<const char*>(&length), sizeof(length));
    framed += text;
    (void)WriteAll(told_fd, framed);
  };
  std::string answer;
  try {
    answer = work(tell);
  } catch (...) {
    _exit(kWorkThrew);
  }
  _exit(WriteAll(answer_fd, answer) ? 0 : kCannotAnswer);
}

// The parent's end of the told pipe: reads framed texts and passes each
// whole one on, in order. Owns the descriptor.
class ToldReader {
 public:
  ToldReader(int fd, const std::function<void(const std::string&)>& heard)
      : fd_(fd), heard_(heard) {}

  [[nodiscard]] int fd() const { return fd_.get(); }

  // One read; at its end (or an error) the pipe is closed.
  void ReadOnce() {
    char buffer[16384];
    const ssize_t got = read(fd_.get(), buffer, sizeof(buffer));
    if (got > 0) {
      pending_.append(buffer, static_cast<std::size_t>(got));
      PassOnWholeTexts();
    } else if (got == 0 || errno != EINTR) {
      fd_ = FileDescriptor(-1);
    }
  }

  // What is already in the pipe, without waiting: told before the answer
  // ended (or before the deadline).
  void ReadWhatIsThere() {
    while (fd_.get() >= 0) {
      pollfd rest{.fd = fd_.get(), .events = POLLIN, .revents = 0};
      const int ready = poll(&rest, 1, 0);
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) return;
      ReadOnce();
    }
  }

 private:
  void PassOnWholeTexts() {
    std::size_t start = 0;
    for (;;) {
      std::uint32_t length = 0;
      if (pending_.size() - start < sizeof(length)) break;
      std::memcpy(&length, pending_.data() + start, sizeof(length));
      if (pending_.size() - start - sizeof(length) < length) break;
      if (heard_) heard_(pending_.substr(start + sizeof(length), length));
      start += sizeof(length) + length;
    }
    pending_.erase(0, start);
  }

  FileDescriptor fd_;
  const std::function<void(const std::string&)>& heard_;
  std::string pending_;
};

// A pipe's two ends, each closed on destruction.
struct OwnedPipe {
  FileDescriptor read{-1};
  FileDescriptor write{-1};
};

Result<OwnedPipe> MakePipe() {
  int ends[2];
  if (pipe2(ends, O_CLOEXEC) != 0) return Status::FromErrno(errno, "cannot create a pipe");
  return OwnedPipe{.read = FileDescriptor(ends[0]), .write = FileDescriptor(ends[1])};
}

}  // namespace

bool KeepOutOfJobUserProcesses(int descriptor) {
  for (auto& slot : kept_out) {
    int free_slot = 0;
    if (slot.compare_exchange_strong(free_slot, descriptor + 1)) return true;
  }
  return false;
}

void AllowIntoJobUserProcesses(int descriptor) {
  for (auto& slot : kept_out) {
    int kept = descriptor + 1;
    if (slot.compare_exchange_strong(kept, 0)) return;
  }
}

Result<std::string> RunAsJobUser(const JobUser& user, const std::function<std::string()>& work,
                                 std::optional<std::chrono::milliseconds> deadline) {
  return RunAsJobUser(user, [&work](const TellCaller&) { return work(); }, deadline, {});
}

Result<std::string> RunAsJobUser(const JobUser& user, const JobUserWork& work,
                                 std::optional<std::chrono::milliseconds> deadline,
                                 const std::function<void(const std::string&)>& heard) {
  const auto give_up_at = deadline ? std::chrono::steady_clock::now() + *deadline
                                   : std::chrono::steady_clock::time_point::max();
  auto answer_pipe = MakePipe();
  if (!answer_pipe.ok()) return answer_pipe.status();
  auto told_pipe = MakePipe();
  if (!told_pipe.ok()) return told_pipe.status();
  const pid_t child = fork();
  if (child < 0) return Status::FromErrno(errno, "cannot fork a process for the job user");
  if (child == 0) {
    // Without the reading ends, a write after slurmstepd's death fails
    // (EPIPE) instead of blocking on a full pipe nobody reads.
    answer_pipe->read = FileDescriptor(-1);
    told_pipe->read = FileDescriptor(-1);
    RunChild(user, work, answer_pipe->write.get(), told_pipe->write.get());
  }
  answer_pipe->write = FileDescriptor(-1);
  told_pipe->write = FileDescriptor(-1);
  FileDescriptor answer_fd = std::move(answer_pipe->read);
  ToldReader told(told_pipe->read.Release(), heard);
  std::string answer;
  char buffer[16384];
  Status read_status;
  bool timed_out = false;
  // Until the answer's end: told texts arrive before it, and a child that
  // ends closes both.
  while (answer_fd.get() >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        give_up_at - std::chrono::steady_clock::now());
    std::array<pollfd, 2> readable = {pollfd{.fd = answer_fd.get(), .events = POLLIN, .revents = 0},
                                      pollfd{.fd = told.fd(), .events = POLLIN, .revents = 0}};
    const int wait_ms = !deadline ? -1 : static_cast<int>(std::max<std::int64_t>(left.count(), 0));
    const int ready =
        deadline && left.count() <= 0 ? 0 : poll(readable.data(), readable.size(), wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      if (ready < 0)
        read_status = Status::FromErrno(errno, "cannot wait for the job user's process");
      timed_out = ready == 0;
      kill(child, SIGKILL);
      break;
    }
    if (told.fd() >= 0 && readable[1].revents != 0) {
      told.ReadOnce();
      continue;  // what was told before the answer is heard before it
    }
    if (readable[0].revents == 0) continue;
    const ssize_t got = read(answer_fd.get(), buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) read_status = Status::FromErrno(errno, "cannot read the job user's process");
    if (got <= 0) break;
    answer.append(buffer, static_cast<std::size_t>(got));
  }
  answer_fd = FileDescriptor(-1);
  told.ReadWhatIsThere();
  int wait_status = 0;
  // Killed for its deadline, a child stuck in the kernel (a hung file
  // system) may not go at once: waited for a second, then left to init's
  // care when slurmstepd ends, rather than holding the step up.
  const auto reap_by = deadline ? std::chrono::steady_clock::now() + std::chrono::seconds(1)
                                : std::chrono::steady_clock::time_point::max();
  for (;;) {
    const pid_t reaped = waitpid(child, &wait_status, deadline ? WNOHANG : 0);
    if (reaped == child) break;
    if (reaped < 0 && errno != EINTR) {
      return Status::FromErrno(errno, "cannot wait for the job user's process");
    }
    if (reaped == 0) {
      if (std::chrono::steady_clock::now() >= reap_by) {
        if (!timed_out) kill(child, SIGKILL);
        return Status::Unavailable("the process working as uid " + std::to_string(user.uid) +
                                   " did not end within 1 s of its answer or of SIGKILL: left "
                                   "behind for slurmstepd's end");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  const std::string who = "the process working as uid " + std::to_string(user.uid);
  if (timed_out) {
    return Status::Unavailable(who + " did not finish within " + std::to_string(deadline->count()) +
                               " ms and was killed");
  }
  SRAY_RETURN_IF_ERROR(read_status);
  if (WIFSIGNALED(wait_status)) {
    return Status::Internal(who + " died of signal " + std::to_string(WTERMSIG(wait_status)) +
                            " (" + strsignal(WTERMSIG(wait_status)) + "): please report this");
  }
  switch (WEXITSTATUS(wait_status)) {
    case 0: return answer;
    case kCannotBecomeUser:
      return Status::PermissionDenied("cannot become uid " + std::to_string(user.uid) + " gid " +
                                      std::to_string(user.gid) + ": slurmstepd must run as root");
    case kWorkThrew: return Status::Internal(who + " failed unexpectedly: please report this");
    default: return Status::IoError(who + " could not send its answer");
  }
}

}  // namespace sray::spank
