#include "common/captured_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <thread>

#include "common/file_descriptor.h"

extern char** environ;

namespace sray {
namespace {

// posix_spawn's attributes and file actions, destroyed however we leave.
class SpawnSettings {
 public:
  SpawnSettings() {
    ::posix_spawn_file_actions_init(&actions_);
    ::posix_spawnattr_init(&attributes_);
  }
  ~SpawnSettings() {
    ::posix_spawn_file_actions_destroy(&actions_);
    ::posix_spawnattr_destroy(&attributes_);
  }
  SpawnSettings(const SpawnSettings&) = delete;
  SpawnSettings& operator=(const SpawnSettings&) = delete;
  posix_spawn_file_actions_t* actions() { return &actions_; }
  posix_spawnattr_t* attributes() { return &attributes_; }

 private:
  posix_spawn_file_actions_t actions_{};
  posix_spawnattr_t attributes_{};
};

std::vector<char*> Pointers(std::vector<std::string>& texts) {
  std::vector<char*> pointers;
  pointers.reserve(texts.size() + 1);
  for (std::string& text : texts) pointers.push_back(text.data());
  pointers.push_back(nullptr);
  return pointers;
}

// Waits for `pid`, until `deadline` if there is one (then kills it, waits
// for that, and says ETIMEDOUT). False with errno set when it was not
// reaped.
bool ReapOrLeave(pid_t pid, int& wait_status,
                 std::optional<std::chrono::steady_clock::time_point> deadline) {
  bool killed = false;
  for (;;) {
    const bool bounded = deadline && !killed;
    const pid_t reaped = ::waitpid(pid, &wait_status, bounded ? WNOHANG : 0);
    if (reaped == pid) {
      // Ended on its own in the moment before the kill: not timed out.
      const bool by_the_kill =
          killed && WIFSIGNALED(wait_status) && WTERMSIG(wait_status) == SIGKILL;
      if (by_the_kill) errno = ETIMEDOUT;
      return !by_the_kill;
    }
    if (reaped < 0 && errno != EINTR) return false;
    if (reaped == 0) {
      if (std::chrono::steady_clock::now() >= *deadline) {
        ::kill(pid, SIGKILL);
        killed = true;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
  }
}

}  // namespace

bool CommandOutcome::ExitedWith(int code) const {
  return !timed_out && WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == code;
}

std::string CommandOutcome::How() const {
  if (timed_out) return "ran past its time limit";
  if (WIFEXITED(wait_status)) return "exit status " + std::to_string(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) {
    return "killed by signal " + std::to_string(WTERMSIG(wait_status)) + " (" +
           ::strsignal(WTERMSIG(wait_status)) + ")";
  }
  return "wait status " + std::to_string(wait_status);
}

Result<CommandOutcome> RunCapturing(const CapturedCommand& command) {
  if (command.argv.empty()) return Status::InvalidArgument("no command to run");
  const std::string& program = command.argv.front();
  int output_ends[2] = {-1, -1};
  if (::pipe2(output_ends, O_CLOEXEC) != 0)
    return Status::FromErrno(errno, "cannot run " + program);
  FileDescriptor output_read(output_ends[0]);
  FileDescriptor output_write(output_ends[1]);
  FileDescriptor errors_read(-1);
  FileDescriptor errors_write(-1);
  if (command.capture_errors) {
    int error_ends[2] = {-1, -1};
    if (::pipe2(error_ends, O_CLOEXEC) != 0)
      return Status::FromErrno(errno, "cannot run " + program);
    errors_read = FileDescriptor(error_ends[0]);
    errors_write = FileDescriptor(error_ends[1]);
  }

  SpawnSettings settings;
  ::posix_spawn_file_actions_adddup2(settings.actions(), output_write.get(), STDOUT_FILENO);
  if (command.capture_errors)
    ::posix_spawn_file_actions_adddup2(settings.actions(), errors_write.get(), STDERR_FILENO);
  if (command.no_input)
    ::posix_spawn_file_actions_addopen(settings.actions(), STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  // Not with its caller's blocked signals (`sray run` blocks INT and TERM
  // for its signalfd, and PIPE): a command that hangs must end on Ctrl-C,
  // and `yes | head` in a script must end as in a shell.
  sigset_t none;
  sigemptyset(&none);
  ::posix_spawnattr_setsigmask(settings.attributes(), &none);
  ::posix_spawnattr_setflags(settings.attributes(), POSIX_SPAWN_SETSIGMASK);
  std::vector<std::string> arguments = command.argv;
  std::vector<char*> argv = Pointers(arguments);
  std::vector<std::string> variables = command.environment.value_or(std::vector<std::string>{});
  std::vector<char*> envp = Pointers(variables);
  pid_t pid = -1;
  const int spawned =
      ::posix_spawn(&pid, program.c_str(), settings.actions(), settings.attributes(), argv.data(),
                    command.environment ? envp.data() : environ);
  output_write = FileDescriptor(-1);
  errors_write = FileDescriptor(-1);
  if (spawned != 0) return Status::FromErrno(spawned, "cannot start " + program);

  CommandOutcome outcome;
  const auto deadline = command.limit ? std::chrono::steady_clock::now() + *command.limit
                                      : std::chrono::steady_clock::time_point::max();
  while (output_read.get() >= 0 || errors_read.get() >= 0) {
    int wait_milliseconds = -1;
    if (command.limit) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        outcome.timed_out = true;
        break;
      }
      wait_milliseconds = static_cast<int>(left.count());
    }
    std::array<pollfd, 2> waits = {pollfd{.fd = output_read.get(), .events = POLLIN, .revents = 0},
                                   pollfd{.fd = errors_read.get(), .events = POLLIN, .revents = 0}};
    if (::poll(waits.data(), waits.size(), wait_milliseconds) < 0 && errno != EINTR) {
      const int error = errno;
      ::kill(pid, SIGKILL);  // nothing more can be read: it must not be waited for
      ReapOrLeave(pid, outcome.wait_status, std::nullopt);
      return Status::FromErrno(error, "cannot read what " + program + " prints");
    }
    for (std::size_t index = 0; index < waits.size(); ++index) {
      if (waits[index].revents == 0) continue;
      FileDescriptor& source = index == 0 ? output_read : errors_read;
      std::string& text = index == 0 ? outcome.output : outcome.errors;
      char buffer[65536];
      const ssize_t got = ::read(source.get(), buffer, sizeof(buffer));
      if (got > 0) {
        const std::size_t room = command.most_bytes - std::min(command.most_bytes, text.size());
        text.append(buffer, std::min(room, static_cast<std::size_t>(got)));
        if (static_cast<std::size_t>(got) > room) outcome.cut_short = true;
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        source = FileDescriptor(-1);
      }
    }
  }
  if (outcome.timed_out) ::kill(pid, SIGKILL);
  // A command that closed its output may still run: within the limit, then
  // killed.
  std::optional<std::chrono::steady_clock::time_point> wait_until;
  if (command.limit && !outcome.timed_out) wait_until = deadline;
  if (!ReapOrLeave(pid, outcome.wait_status, wait_until)) {
    if (errno != ETIMEDOUT)
      return Status::FromErrno(errno, "cannot learn how " + program + " ended");
    outcome.timed_out = true;
  }
  return outcome;
}

}  // namespace sray
