#include "local_job.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "common/executable_search.h"
#include "common/host_name.h"
#include "dashboard/jobs_file.h"
#include "embedded_pmix_server.h"
#include "inherited_signals.h"
#include "job_janitor.h"
#include "jobsetup/node_setup.h"
#include "jobsetup/resolved_options.h"
#include "jobsetup/step_processes.h"
#include "output_relay.h"
#include "private_output.h"

namespace sray::launcher {
namespace {

// How long ranks get between SIGTERM and SIGKILL when the job is ended.
constexpr std::chrono::seconds kTerminationGrace{3};
// After a rank fails, how long the others get to notice (their calls to it
// fail) and exit on their own before they are ended. srun waits forever by
// default; a bound keeps a job whose survivors hang from hanging.
constexpr std::chrono::seconds kFailureGrace{10};
// After the driver's rank ended, how long the others get to end. The driver
// tells every node to end as it shuts down, and they do within moments; a
// node the head shut out of the job (no heartbeat: frozen, cut off) is not
// told, and one that stays frozen would keep the job from ending.
constexpr std::chrono::seconds kAfterDriverGrace{10};

// Variables of an enclosing PMIx job (an srun step, another sray run) that
// must reach neither the embedded server nor the ranks.
bool BelongsToOuterJob(std::string_view entry) {
  return entry.starts_with("PMIX_") || entry.starts_with("PMI_") ||
         entry.starts_with("SLURM_PMIX") || entry.starts_with("SLURM_PMI") ||
         entry.starts_with("SRAY_RENDEZVOUS=");
}

void ScrubOuterJobEnvironment() {
  std::vector<std::string> names;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string_view text(*entry);
    if (BelongsToOuterJob(text)) names.emplace_back(text.substr(0, text.find('=')));
  }
  for (const auto& name : names) unsetenv(name.c_str());
}

// Finds the program like execvp would, so a typo fails before anything starts.
Result<std::string> ResolveProgram(const std::string& program) {
  if (program.empty())
    return Status::InvalidArgument("no program given: usage: sray run [options] PROGRAM [ARGS...]");
  // CLI11 takes the first word it does not know, an option too, for PROGRAM.
  if (program.starts_with('-')) {
    return Status::InvalidArgument("unknown option '" + program +
                                   "' of sray run: see `sray run --help` (a program whose name "
                                   "starts with '-' needs a path: ./" +
                                   program + ")");
  }
  if (program.find('/') != std::string::npos) {
    if (IsExecutableFile(program)) return program;
    std::error_code error;
    if (std::filesystem::is_regular_file(program, error)) {
      return Status::PermissionDenied("cannot run '" + program +
                                      "': the file is not executable: chmod +x " + program);
    }
    return Status::NotFound("cannot run '" + program +
                            "': no executable file there: check the path");
  }
  const char* path = std::getenv("PATH");
  if (auto found = FindExecutableOnPath(program, path != nullptr ? path : "/usr/bin:/bin")) {
    return found->string();
  }
  return Status::NotFound("cannot run '" + program +
                          "': not found in PATH: give its path, e.g. ./" + program);
}

// Output of one rank's stream, forwarded line by line so lines of different
// ranks never interleave mid-line.
struct OutputStream {
  std::uint32_t rank = 0;
  int source_fd = -1;
  int target_fd = STDOUT_FILENO;
  std::string pending;
};

// Eight hex digits from the kernel's random pool (job ids allow letters,
// digits, '_' and '-').
std::string RandomSuffix() {
  std::uint32_t value = 0;
  if (::getrandom(&value, sizeof(value), 0) != static_cast<ssize_t>(sizeof(value))) {
    value = static_cast<std::uint32_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }
  char text[9];
  std::snprintf(text, sizeof(text), "%08x", value);
  return text;
}

// The signals this launcher ends by, once it has ended the job, when they
// interrupted it. Not SIGQUIT: its default action dumps core.
int EndsBy(int signal) {
  return signal == SIGINT || signal == SIGTERM || signal == SIGHUP || signal == SIGPIPE ? signal
                                                                                        : 0;
}

class LocalJob {
 public:
  explicit LocalJob(const LocalJobRequest& request) : request_(request) {}

  Result<LocalJobEnd> Run() {
    SRAY_RETURN_IF_ERROR(BlockSignals());
    // Now, while this process has one thread, and before anything exists
    // that a killed launcher would leave behind.
    auto janitor = JobJanitor::Start();
    if (!janitor.ok()) return janitor.status();
    janitor_.emplace(std::move(janitor).value());
    ScrubOuterJobEnvironment();
    auto program = ResolveProgram(request_.command.empty() ? "" : request_.command.front());
    if (!program.ok()) {
      janitor_->Dismiss();
      return program.status();
    }
    program_ = *program;
    auto options = jobsetup::ResolveOptions(
        {.admin_config = request_.admin_config, .option_list = request_.option_list});
    if (!options.ok()) {
      janitor_->Dismiss();
      return options.status();
    }
    options_ = std::move(options).value();

    Status prepared = PrepareNodesAndServer();
    // Signals stay pending while the nodes are prepared (staging an
    // environment may take minutes): an interrupt then must not start the
    // program once preparation ends.
    if (const int signal = PendingInterrupt(); signal != 0) {
      TerminateAll(SIGKILL);
      ReapAll();
      CleanUp();
      std::cerr << "sray: interrupted by " << strsignal(signal)
                << " while the nodes were being prepared: the program was not started\n";
      return LocalJobEnd{.exit_status = 128 + signal, .interrupting_signal = EndsBy(signal)};
    }
    if (prepared.ok()) prepared = SpawnRanks();
    if (!prepared.ok()) {
      TerminateAll(SIGKILL);
      ReapAll();
      CleanUp();
      return prepared;
    }
    EventLoop();
    CleanUp();
    // Another rank failed after a node was lost: the loss is the likely cause.
    if (exit_status_ != 0 && lost_status_ != 0 && !status_requested_) {
      return LocalJobEnd{.exit_status = lost_status_, .interrupting_signal = 0};
    }
    const bool interrupted = interrupted_by_ != 0 && exit_status_ == 128 + interrupted_by_;
    return LocalJobEnd{.exit_status = exit_status_,
                       .interrupting_signal = interrupted ? EndsBy(interrupted_by_) : 0};
  }

 private:
  struct Rank {
    pid_t pid = -1;
    bool running = false;
  };

  Status BlockSignals() {
    // A parent that ignored SIGCHLD passes that on through exec: the system
    // would then reap the ranks unseen, and the launcher wait for them for
    // ever (and the ranks, inheriting it, for their workers).
    if (::signal(SIGCHLD, SIG_DFL) == SIG_ERR) {
      return Status::FromErrno(errno, "cannot restore the default action of SIGCHLD");
    }
    // nohup: a hang-up the caller ignored stays ignored, for the launcher
    // and the ranks (UCX's initializer replaced the ignore with a handler of
    // its own). Not blocked either: the kernel keeps a blocked signal pending
    // even when it is ignored.
    const bool hang_up_ignored = HangUpIgnoredAtStart();
    bool hang_up_still_handled = false;
    if (hang_up_ignored) {
      (void)::signal(SIGHUP, SIG_IGN);
      // UCX 1.12 and older wrap signal() and keep their own handler: then
      // SIGHUP stays blocked and unread instead (the ranks get the mask
      // back without it pending).
      struct sigaction now {};
      hang_up_still_handled = ::sigaction(SIGHUP, nullptr, &now) != 0 || now.sa_handler != SIG_IGN;
    }
    for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
      if (signal != SIGHUP || !hang_up_ignored) interrupt_signals_.insert(signal);
    }
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGCHLD);
    for (int signal : interrupt_signals_) sigaddset(&signals, signal);
    // Before any thread exists, so every thread inherits the mask and the
    // signals arrive only through the signalfd below.
    // SIGPIPE too, but not through the signalfd: a reader that goes away
    // (`sray run ... | head`) must not kill the launcher before it ends the
    // ranks and removes its directories; its writes fail instead. The ranks
    // get the original mask back, and a fork starts with no pending signal.
    sigset_t blocked = signals;
    sigaddset(&blocked, SIGPIPE);
    // SIGTTIN too: a launcher put in the background while it forwards the
    // terminal to rank 0 gets EIO from its read (and stops forwarding)
    // instead of being stopped.
    sigaddset(&blocked, SIGTTIN);
    if (hang_up_still_handled) sigaddset(&blocked, SIGHUP);
    if (pthread_sigmask(SIG_BLOCK, &blocked, &original_mask_) != 0) {
      return Status::Internal("cannot block signals");
    }
    signal_fd_ = signalfd(-1, &signals, SFD_CLOEXEC);
    if (signal_fd_ < 0) return Status::FromErrno(errno, "cannot create a signalfd");
    return Status::Ok();
  }

  // An interrupt (INT, TERM, HUP, QUIT) waiting in the signalfd, without
  // reading it; 0 when none.
  int PendingInterrupt() const {
    sigset_t pending;
    sigemptyset(&pending);
    if (sigpending(&pending) != 0) return 0;
    for (int signal : interrupt_signals_) {
      if (sigismember(&pending, signal) == 1) return signal;
    }
    return 0;
  }

  Status PrepareNodesAndServer() {
    // The pid alone repeats once pids wrap, and a launcher killed by SIGKILL
    // leaves its directories: a random suffix keeps a new job off them.
    job_id_ = "local" + std::to_string(getpid()) + "-" + RandomSuffix();
    janitor_->WatchJobsFile(dashboard::UserHome(), job_id_, "0");
    cpus_per_node_ = request_.cpus_per_node != 0
                         ? request_.cpus_per_node
                         : static_cast<std::uint32_t>(sysconf(_SC_NPROCESSORS_ONLN));
    // Emulated nodes share this machine's memory: by default each gets its share.
    const std::uint64_t memory_per_node = request_.memory_per_node != 0
                                              ? request_.memory_per_node
                                              : jobsetup::MachineMemoryBytes() / request_.nodes;
    const std::string host = HostName();
    for (std::uint32_t node = 0; node < request_.nodes; ++node) {
      if (PendingInterrupt() != 0) return Status::Ok();  // Run says so
      auto setup = jobsetup::PrepareNode({.job_id = job_id_,
                                          .step_id = "0",
                                          .node_id = node,
                                          .num_nodes = request_.nodes,
                                          .node_cpus = cpus_per_node_,
                                          .node_memory_bytes = memory_per_node,
                                          .head_host = host,
                                          .uid = getuid(),
                                          .options = options_,
                                          .session_directory_per_node = true,
                                          .nodes_on_this_machine = request_.nodes,
                                          .task_variable =
                                              [](const std::string& name) {
                                                const char* value = std::getenv(name.c_str());
                                                return value == nullptr
                                                           ? std::optional<std::string>()
                                                           : std::optional<std::string>(value);
                                              },
                                          .progress =
                                              [node](const std::string& line) {
                                                std::cerr << "sray: node " << node << ": " << line
                                                          << std::endl;
                                              },
                                          .interrupted = [this] { return PendingInterrupt() != 0; },
                                          // Before staging: a launcher killed
                                          // meanwhile leaves nothing of the node.
                                          .created =
                                              [this](const jobsetup::NodeSetup& created) {
                                                janitor_->WatchNode(created);
                                              }});
      if (!setup.ok())
        return setup.status().WithContext("cannot prepare emulated node " + std::to_string(node));
      nodes_.push_back(std::move(setup).value());
    }
    pmix_directory_ = std::filesystem::path(options_.Get("tmpdir")) /
                      ("sray-" + std::to_string(getuid()) + "-" + job_id_ + ".pmix");
    // Told first: a launcher killed right after the mkdir leaves nothing.
    // The name carries this job's random id, so it is no one else's.
    janitor_->WatchDirectory(pmix_directory_);
    if (::mkdir(pmix_directory_.c_str(), 0700) != 0) {
      return Status::FromErrno(errno, "cannot create " + pmix_directory_.string());
    }
    auto server = EmbeddedPmixServer::Start(pmix_directory_);
    if (!server.ok()) return server.status();
    server_ = std::move(server).value();
    server_->OnAbort([this](const AbortRequest& abort) {
      {
        std::lock_guard lock(abort_mutex_);
        if (!abort_) abort_ = abort;
      }
      const std::uint64_t one = 1;
      // A full pipe already holds a wake-up; nothing is lost by dropping this.
      if (::write(abort_pipe_[1], &one, sizeof(one)) < 0) return;
    });
    if (::pipe2(abort_pipe_, O_CLOEXEC | O_NONBLOCK) != 0)
      return Status::FromErrno(errno, "cannot create a pipe");

    EmulatedJobLayout layout;
    layout.namespace_name = "sray." + job_id_;
    layout.job_id = job_id_;
    layout.num_nodes = request_.nodes;
    layout.tasks_per_node = request_.tasks_per_node;
    for (std::uint32_t node = 0; node < request_.nodes; ++node) {
      layout.node_names.push_back(host + "-node" + std::to_string(node));
    }
    layout_ = layout;
    return server_->RegisterJob(layout, getuid(), getgid());
  }

  Result<std::vector<std::string>> EnvironmentOf(std::uint32_t rank) {
    std::map<std::string, std::string> variables;
    for (char** entry = environ; *entry != nullptr; ++entry) {
      std::string_view text(*entry);
      const auto equals = text.find('=');
      if (equals == std::string_view::npos) continue;
      variables[std::string(text.substr(0, equals))] = std::string(text.substr(equals + 1));
    }
    const jobsetup::NodeSetup& node = nodes_[layout_.NodeOf(rank)];
    for (const auto& [name, value] : jobsetup::ToEnvironmentVariables(node.environment))
      variables[name] = value;
    for (const auto& name : node.environment.unset_variables) variables.erase(name);
    // This launcher's own PMIx server serves the exchange, whatever wireup
    // says (it is about srun), and the ranks must not wait for srun's
    // invitation when the launcher runs inside an srun step.
    variables.insert_or_assign("SRAY_WIREUP", "pmix");
    for (const auto& [name, value] : jobsetup::TransportEnvironmentDefaults(node.environment))
      variables.try_emplace(name, value);
    // Decided here, from where this launcher's own output goes: a value in
    // the launcher's environment is not passed on.
    auto [private_name, private_value] = jobsetup::OutputPrivateVariable(output_private_);
    variables.insert_or_assign(std::move(private_name), std::move(private_value));
    auto client = server_->ClientEnvironment(rank);
    if (!client.ok()) return client.status();
    for (const auto& entry : *client) {
      const auto equals = entry.find('=');
      if (equals != std::string::npos)
        variables[entry.substr(0, equals)] = entry.substr(equals + 1);
    }
    std::vector<std::string> flattened;
    flattened.reserve(variables.size());
    for (const auto& [name, value] : variables) flattened.push_back(name + "=" + value);
    return flattened;
  }

  // A terminal on standard input is read by this launcher and forwarded to
  // rank 0, as srun does; the other ranks read /dev/null. Decided when the
  // ranks start: a launcher started in the background forwards nothing, and
  // one put in the background later stops forwarding (its read fails). Each rank has a
  // process group of its own (so that ending it reaches its children), and
  // a background group that reads the terminal is stopped by SIGTTIN: a
  // program asking for input hung, stopped, with nothing said. Input that is
  // not a terminal (a file, a pipe) is inherited by rank 0 as it is; the
  // other ranks read /dev/null there too (they shared it, and whichever read
  // first took the input).
  Status PrepareStandardInput() {
    null_input_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_input_ < 0) return Status::FromErrno(errno, "cannot open /dev/null");
    if (::isatty(STDIN_FILENO) != 1) {
      rank_zero_inherits_input_ = true;
      return Status::Ok();
    }
    // From the background, the launcher cannot read the terminal either.
    if (::tcgetpgrp(STDIN_FILENO) != ::getpgrp()) return Status::Ok();
    int input[2] = {-1, -1};
    if (::pipe2(input, O_CLOEXEC) != 0)
      return Status::FromErrno(errno, "cannot create an input pipe");
    rank_zero_input_ = input[0];
    input_sink_ = input[1];
    // Never blocks the event loop (rank 0 may not read its input at all):
    // what the pipe cannot take waits in input_pending_. The terminal is
    // still read meanwhile: a full terminal queue would hold back the
    // Ctrl-C typed after a large paste.
    ::fcntl(input_sink_, F_SETFL, O_NONBLOCK);
    return Status::Ok();
  }

  void StopForwardingInput() {
    if (input_sink_ >= 0) ::close(input_sink_);
    input_sink_ = -1;
    input_pending_.clear();
    input_ended_ = false;
  }

  // Reads what the terminal has; at its end (Ctrl-D), or EIO in the
  // background, rank 0's input ends once what waits has gone.
  void ReadInput() {
    char buffer[4096];
    const ssize_t got = ::read(STDIN_FILENO, buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) return;
    if (got <= 0) {
      input_ended_ = true;
    } else if (input_pending_.size() < kInputPendingLimit) {
      input_pending_.append(buffer, static_cast<std::size_t>(got));
    } else if (!input_dropped_) {
      input_dropped_ = true;
      output_.Write(STDERR_FILENO,
                    "sray: rank 0 does not read its standard input: what is typed beyond 1 MiB "
                    "is dropped\n");
    }
    WriteInput();
  }

  void WriteInput() {
    while (!input_pending_.empty()) {
      const ssize_t written = ::write(input_sink_, input_pending_.data(), input_pending_.size());
      if (written < 0 && errno == EINTR) continue;
      if (written < 0 && errno == EAGAIN) return;  // the pipe is full: POLLOUT
      if (written <= 0) {  // rank 0 closed its input or ended
        StopForwardingInput();
        return;
      }
      input_pending_.erase(0, static_cast<std::size_t>(written));
    }
    if (input_ended_) StopForwardingInput();
  }

  Status SpawnRanks() {
    SRAY_RETURN_IF_ERROR(PrepareStandardInput());
    // Made before any fork: a child may only write them.
    const std::string exec_failures[] = {
        "sray: cannot run " + program_ +
            ": it is not a program this machine can run (exec format error): a script needs a "
            "first line naming its interpreter, e.g. #!/bin/sh\n",
        "sray: cannot run " + program_ +
            ": the interpreter its #! line names does not exist: correct that line\n",
        "sray: cannot run " + program_ +
            ": permission denied (its file system may be mounted noexec, or its #! interpreter "
            "is not executable): run it from elsewhere\n",
        "sray: cannot run " + program_ + ": exec failed: check the program and its #! line\n"};
    ranks_.resize(layout_.size());
    for (std::uint32_t rank = 0; rank < layout_.size(); ++rank) {
      auto environment = EnvironmentOf(rank);
      if (!environment.ok()) return environment.status();
      int out[2] = {-1, -1};
      int err[2] = {-1, -1};
      if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
        return Status::FromErrno(errno, "cannot create output pipes");
      }
      std::vector<char*> argv;
      for (const auto& argument : request_.command)
        argv.push_back(const_cast<char*>(argument.c_str()));
      argv.push_back(nullptr);
      std::vector<char*> envp;
      for (const auto& entry : *environment) envp.push_back(const_cast<char*>(entry.c_str()));
      envp.push_back(nullptr);

      const pid_t pid = ::fork();
      if (pid < 0) return Status::FromErrno(errno, "cannot start rank " + std::to_string(rank));
      if (pid == 0) {
        // Only async-signal-safe calls from here to exec.
        ::setpgid(0, 0);  // its own group, so ending it reaches its children
        int input = null_input_;
        if (rank == 0 && rank_zero_input_ >= 0) input = rank_zero_input_;
        if (rank == 0 && rank_zero_inherits_input_) input = -1;
        if (input >= 0) ::dup2(input, STDIN_FILENO);
        ::dup2(out[1], STDOUT_FILENO);
        ::dup2(err[1], STDERR_FILENO);
        ::pthread_sigmask(SIG_SETMASK, &original_mask_, nullptr);
        ::execve(program_.c_str(), argv.data(), envp.data());
        const int failure = errno;
        const std::string& message = failure == ENOEXEC  ? exec_failures[0]
                                     : failure == ENOENT ? exec_failures[1]
                                     : failure == EACCES ? exec_failures[2]
                                                         : exec_failures[3];
        // Every rank runs the same program: one of them says why.
        if (rank == 0) (void)!::write(STDERR_FILENO, message.data(), message.size());
        ::_exit(127);
      }
      ::setpgid(pid, pid);  // also here, so the group exists before we signal it
      ::close(out[1]);
      ::close(err[1]);
      if (rank == 0 && rank_zero_input_ >= 0) {
        ::close(rank_zero_input_);
        rank_zero_input_ = -1;
      }
      ranks_[rank] = {.pid = pid, .running = true};
      streams_.push_back(
          {.rank = rank, .source_fd = out[0], .target_fd = STDOUT_FILENO, .pending = {}});
      streams_.push_back(
          {.rank = rank, .source_fd = err[0], .target_fd = STDERR_FILENO, .pending = {}});
    }
    return Status::Ok();
  }

  void Forward(OutputStream& stream, bool at_end) {
    std::size_t start = 0;
    const std::string_view pending = stream.pending;
    for (;;) {
      const auto newline = pending.find('\n', start);
      if (newline == std::string_view::npos) break;
      Emit(stream, pending.substr(start, newline + 1 - start));
      start = newline + 1;
    }
    stream.pending.erase(0, start);
    if (at_end && !stream.pending.empty()) {
      stream.pending += '\n';
      Emit(stream, stream.pending);
      stream.pending.clear();
    }
  }

  void Emit(const OutputStream& stream, std::string_view line) {
    if (!request_.label) {
      output_.Write(stream.target_fd, line);
      return;
    }
    std::string labelled = std::to_string(stream.rank) + ": ";
    labelled.append(line);
    output_.Write(stream.target_fd, labelled);
  }

  [[nodiscard]] bool AnyRunning() const {
    for (const auto& rank : ranks_) {
      if (rank.running) return true;
    }
    return false;
  }
  // Node 0's ranks all still run (not even exited unreaped: a head that died
  // in the same moment as another node must end the job), and its head said
  // it goes on without a lost node (jobsetup::kHandlesNodeLossFile).
  [[nodiscard]] bool HeadHandlesNodeLoss() const {
    for (std::uint32_t rank = 0; rank < ranks_.size(); ++rank) {
      if (layout_.NodeOf(rank) != 0) continue;
      if (!ranks_[rank].running) return false;
      siginfo_t info{};
      if (::waitid(P_PID, static_cast<id_t>(ranks_[rank].pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
          info.si_pid != 0) {
        return false;
      }
    }
    std::error_code error;
    return !nodes_.empty() &&
           std::filesystem::exists(nodes_.front().session_directory / jobsetup::kHandlesNodeLossFile, error);
  }

  void TerminateAll(int signal) {
    for (const auto& rank : ranks_) {
      if (rank.running && rank.pid > 0) ::kill(-rank.pid, signal);
    }
  }

  void BeginTermination(const std::string& reason) {
    if (terminating_) return;
    terminating_ = true;
    if (!reason.empty()) output_.Write(STDERR_FILENO, "sray: " + reason + "\n");
    TerminateAll(SIGTERM);
    kill_deadline_ = std::chrono::steady_clock::now() + kTerminationGrace;
  }

  void RecordExit(std::uint32_t rank, int wait_status) {
    ranks_[rank].running = false;
    // Only a sray driver's job: the ranks of other programs may outlive
    // rank 0 as long as they like.
    std::error_code error;
    if (rank == 0 && !after_driver_deadline_ && !nodes_.empty() &&
        std::filesystem::exists(nodes_.front().session_directory / jobsetup::kHandlesNodeLossFile,
                                error)) {
      after_driver_deadline_ = std::chrono::steady_clock::now() + kAfterDriverGrace;
    }
    // Ended by this launcher after the driver's end: the driver's status is
    // the job's, and the node was said to be shut out already.
    if (ending_after_driver_ && WIFSIGNALED(wait_status)) return;
    int code = 0;
    std::string how;
    if (WIFEXITED(wait_status)) {
      code = WEXITSTATUS(wait_status);
      how = "exited with status " + std::to_string(code);
    } else if (WIFSIGNALED(wait_status)) {
      code = 128 + WTERMSIG(wait_status);
      how = std::string("was killed by signal ") + strsignal(WTERMSIG(wait_status));
    }
    if (code == 0) return;
    // A rank killed by a signal is the cause even when others, seeing it
    // die, exited before the kernel reported its death (its teardown closes
    // its connections before it becomes a zombie).
    // Signals this launcher sent itself (ending the job) do not count.
    const bool by_signal = WIFSIGNALED(wait_status) && !terminating_;
    if (by_signal && layout_.NodeOf(rank) != 0 && HeadHandlesNodeLoss()) {
      // A node manager killed (kill -9, a crash, the OOM killer): its node
      // is lost, and the head goes on without it. If every other rank ends
      // well the job's status is 0; if another fails too, the killing is the
      // likely cause and its status is the job's.
      if (lost_status_ == 0) lost_status_ = code;
      output_.Write(STDERR_FILENO, "sray: rank " + std::to_string(rank) + " (node " +
                                       std::to_string(layout_.NodeOf(rank)) + ") " + how +
                                       ": its node is lost; the job goes on without it\n");
      return;
    }
    if (exit_status_ == 0 || (by_signal && !exit_by_signal_)) {
      exit_status_ = code;
      exit_by_signal_ = by_signal;
    }
    if (!terminating_ && !failure_deadline_) {
      output_.Write(STDERR_FILENO, "sray: rank " + std::to_string(rank) + " (node " +
                                       std::to_string(layout_.NodeOf(rank)) + ") " + how +
                                       ": the other ranks are ended in " +
                                       std::to_string(kFailureGrace.count()) +
                                       " s unless they exit first\n");
      failure_deadline_ = std::chrono::steady_clock::now() + kFailureGrace;
    }
  }

  void Reap() {
    // Ranks that ended since the last look, in no particular order from the
    // kernel. A rank killed by a signal is taken as the first failure among
    // them: the others usually exited because they saw it die.
    std::vector<std::pair<std::uint32_t, int>> ended;
    for (;;) {
      int wait_status = 0;
      const pid_t pid = ::waitpid(-1, &wait_status, WNOHANG);
      if (pid <= 0) break;
      for (std::uint32_t rank = 0; rank < ranks_.size(); ++rank) {
        if (ranks_[rank].pid == pid) ended.emplace_back(rank, wait_status);
      }
    }
    std::stable_partition(ended.begin(), ended.end(),
                          [](const auto& exit) { return WIFSIGNALED(exit.second); });
    for (const auto& [rank, wait_status] : ended) RecordExit(rank, wait_status);
  }

  void ReapAll() {
    while (AnyRunning()) {
      int wait_status = 0;
      const pid_t pid = ::waitpid(-1, &wait_status, 0);
      if (pid < 0) break;
      for (auto& rank : ranks_) {
        if (rank.pid == pid) rank.running = false;
      }
    }
  }

  void HandleSignal() {
    signalfd_siginfo info{};
    while (::read(signal_fd_, &info, sizeof(info)) == sizeof(info)) {
      const int signal = static_cast<int>(info.ssi_signo);
      if (signal == SIGCHLD) {
        Reap();
        continue;
      }
      interrupt_received_ = true;
      if (exit_status_ == 0) {
        exit_status_ = 128 + signal;
        status_requested_ = true;
        interrupted_by_ = signal;
      }
      if (terminating_) {
        TerminateAll(SIGKILL);  // a second interrupt: no more grace
      } else {
        BeginTermination(std::string("interrupted by ") + strsignal(signal) +
                         ": ending every rank");
      }
    }
  }

  // The reader of the job's output went away (`sray run ... | head`): the
  // job ends as a pipeline's writer does, by SIGPIPE, silently, instead of
  // running to its end with its output dropped (an endless producer ran
  // for good, the launcher busy dropping).
  void EndIfReaderGone() {
    if (!output_.ReaderGone() || terminating_) return;
    if (exit_status_ == 0) {
      exit_status_ = 128 + SIGPIPE;
      status_requested_ = true;
      interrupted_by_ = SIGPIPE;
    }
    BeginTermination("");
  }

  void HandleAbort() {
    std::uint64_t ignored = 0;
    while (::read(abort_pipe_[0], &ignored, sizeof(ignored)) > 0) {
    }
    std::optional<AbortRequest> abort;
    {
      std::lock_guard lock(abort_mutex_);
      abort = abort_;
    }
    if (!abort || abort_handled_) return;
    abort_handled_ = true;
    if (exit_status_ == 0) {
      exit_status_ = abort->status;
      status_requested_ = true;
    }
    BeginTermination("rank " + std::to_string(abort->rank) + " aborted the job" +
                     (abort->message.empty() ? std::string() : ": " + abort->message));
  }

  void EventLoop() {
    ::fcntl(signal_fd_, F_SETFL, O_NONBLOCK);
    for (;;) {
      std::vector<pollfd> descriptors;
      descriptors.push_back({.fd = signal_fd_, .events = POLLIN, .revents = 0});
      descriptors.push_back({.fd = abort_pipe_[0], .events = POLLIN, .revents = 0});
      // Past what the relay holds, the ranks' pipes are left unread: a
      // reader that is slow to take their output slows the ranks down. Once
      // every rank has ended they are read whatever the relay holds: what
      // the pipes still hold is bounded, and the job's files go only after.
      const bool reading = !output_.Full() || drain_deadline_.has_value();
      bool output_open = false;
      for (const auto& stream : streams_) {
        if (stream.source_fd < 0) continue;
        output_open = true;
        if (reading)
          descriptors.push_back({.fd = stream.source_fd, .events = POLLIN, .revents = 0});
      }
      if (input_sink_ >= 0 && !ranks_.empty() && !ranks_[0].running) StopForwardingInput();
      const std::size_t input_index = descriptors.size();
      if (input_sink_ >= 0 && !input_ended_) {
        descriptors.push_back({.fd = STDIN_FILENO, .events = POLLIN, .revents = 0});
      }
      if (input_sink_ >= 0 && !input_pending_.empty()) {  // rank 0's pipe had no room
        descriptors.push_back({.fd = input_sink_, .events = POLLOUT, .revents = 0});
      }
      for (const int waiting : output_.WaitingDescriptors()) {
        descriptors.push_back({.fd = waiting, .events = POLLOUT, .revents = 0});
      }
      if (!AnyRunning() && !output_open) return;
      if (!AnyRunning() && output_open && !drain_deadline_) {
        // Every rank has exited; whatever still holds a pipe is a leftover.
        EndLeftovers();
        drain_deadline_ = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      }
      if (drain_deadline_ && std::chrono::steady_clock::now() > *drain_deadline_) return;
      if (failure_deadline_ && !terminating_ &&
          std::chrono::steady_clock::now() > *failure_deadline_) {
        BeginTermination("ending the ranks still running after a rank failed");
      }
      if (after_driver_deadline_ && !failure_deadline_ && !terminating_ && AnyRunning() &&
          std::chrono::steady_clock::now() > *after_driver_deadline_) {
        ending_after_driver_ = true;
        BeginTermination("ending the ranks still running " +
                         std::to_string(kAfterDriverGrace.count()) +
                         " s after the driver's rank ended (a node shut out of the job, stopped "
                         "or frozen, is not told to end)");
      }
      if (terminating_ && AnyRunning() && std::chrono::steady_clock::now() > kill_deadline_) {
        TerminateAll(SIGKILL);
      }
      (void)::poll(descriptors.data(), descriptors.size(), 100);
      output_.Flush();
      EndIfReaderGone();
      // An abort before the ranks' exits, even when only their SIGCHLD is
      // readable yet: ranks that exit because of it must not be taken for
      // the cause (a CI run once ended with another status than the one
      // PMIx_Abort asked for).
      if (descriptors[0].revents != 0 || descriptors[1].revents != 0) HandleAbort();
      if (descriptors[0].revents != 0) HandleSignal();
      for (std::size_t i = input_index; i < descriptors.size(); ++i) {
        if (descriptors[i].revents == 0 || input_sink_ < 0) continue;
        if (descriptors[i].fd == STDIN_FILENO) {
          ReadInput();
        } else if (descriptors[i].fd == input_sink_) {
          WriteInput();
        }
      }
      for (std::size_t i = 2; i < input_index; ++i) {
        if (descriptors[i].revents == 0) continue;
        for (auto& stream : streams_) {
          if (stream.source_fd != descriptors[i].fd) continue;
          if (output_.Full() && !drain_deadline_) break;  // the next pass waits for the reader
          char buffer[65536];
          const ssize_t got = ::read(stream.source_fd, buffer, sizeof(buffer));
          if (got > 0) {
            stream.pending.append(buffer, static_cast<std::size_t>(got));
            Forward(stream, false);
          } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
            Forward(stream, true);
            ::close(stream.source_fd);
            stream.source_fd = -1;
          }
        }
      }
    }
  }

  void EndLeftovers() {
    std::vector<jobsetup::StepProcessSelector> selectors;
    for (const auto& node : nodes_) {
      selectors.push_back({.uid = getuid(),
                           .session_directory = node.session_directory,
                           .node_id = node.environment.node_id});
    }
    (void)jobsetup::EndStepProcesses(selectors, std::chrono::milliseconds(1000));
  }

  void CleanUp() {
    EndLeftovers();
    for (auto& stream : streams_) {
      if (stream.source_fd >= 0) {
        Forward(stream, true);
        ::close(stream.source_fd);
        stream.source_fd = -1;
      }
    }
    server_.reset();
    if (!nodes_.empty()) {  // the driver's, where its $HOME is not this launcher's
      dashboard::RemoveNotedJobsFile(nodes_.front().session_directory, job_id_, "0");
    }
    for (const auto& node : nodes_) {
      if (Status removed = jobsetup::TeardownNode(node); !removed.ok()) {
        output_.Write(STDERR_FILENO, "sray: " + removed.message() + "\n");
      }
    }
    if (!pmix_directory_.empty()) {
      std::error_code ignored;
      std::filesystem::remove_all(pmix_directory_, ignored);
    }
    // The driver removes it; a killed one cannot.
    dashboard::RemoveJobsFile(dashboard::UserHome(), job_id_, "0");
    janitor_->Dismiss();
    DrainOutput();
  }

  // Last, once nothing of the job is left: a reader that stopped reading
  // must not keep the job's files. Waits for the reader as long as it
  // takes; after an interrupt during the job, one second more; an
  // interrupt during this wait ends it at once.
  void DrainOutput() {
    sigset_t interrupts;
    sigemptyset(&interrupts);
    for (int signal : interrupt_signals_) sigaddset(&interrupts, signal);
    // SIGCHLD no longer matters, and must not end the wait; without the
    // signalfd, the wait is bounded instead.
    const bool watching = ::signalfd(signal_fd_, &interrupts, 0) >= 0;
    std::optional<std::chrono::steady_clock::time_point> deadline;
    if (interrupt_received_ || !watching) {
      deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    }
    const std::size_t dropped_before = output_.DroppedBytes();
    const auto end = output_.Drain(deadline, watching ? signal_fd_ : -1);
    if (end == OutputRelay::DrainEnd::kStopReadable) {
      signalfd_siginfo info{};
      if (::read(signal_fd_, &info, sizeof(info)) == sizeof(info) && exit_status_ == 0) {
        exit_status_ = 128 + static_cast<int>(info.ssi_signo);
        status_requested_ = true;
        interrupted_by_ = static_cast<int>(info.ssi_signo);
      }
    }
    // Not for a reader that went away meanwhile (`| head`): that drop is silent.
    if (const std::size_t dropped = output_.DroppedBytes() - dropped_before;
        end != OutputRelay::DrainEnd::kWritten && dropped > 0) {
      // Reaches the user where standard error is not the stalled target.
      output_.Write(STDERR_FILENO,
                    "sray: " + std::to_string(dropped) +
                        " bytes of the job's output were dropped: their reader did not take "
                        "them before the interrupt; read the output sooner, or send it to a "
                        "file\n");
    }
  }

  const LocalJobRequest& request_;
  std::string program_;
  jobsetup::ResolvedOptions options_;
  std::string job_id_;
  std::uint32_t cpus_per_node_ = 0;
  EmulatedJobLayout layout_;
  std::vector<jobsetup::NodeSetup> nodes_;
  std::filesystem::path pmix_directory_;
  std::optional<JobJanitor> janitor_;
  std::unique_ptr<EmbeddedPmixServer> server_;
  std::vector<Rank> ranks_;
  std::vector<OutputStream> streams_;
  // Standard input where it is a terminal (PrepareStandardInput): rank 0
  // reads the pipe this launcher writes what it reads from the terminal to.
  int null_input_ = -1;
  int rank_zero_input_ = -1;
  bool rank_zero_inherits_input_ = false;  // input that is not a terminal
  int input_sink_ = -1;
  static constexpr std::size_t kInputPendingLimit = std::size_t{1} << 20;
  std::string input_pending_;  // read from the terminal, not yet taken by rank 0
  bool input_ended_ = false;   // the terminal's input ended; close once sent
  bool input_dropped_ = false;
  sigset_t original_mask_{};
  int signal_fd_ = -1;
  int abort_pipe_[2] = {-1, -1};
  // Ranks' output is relayed to this launcher's standard output and error;
  // the driver's start line (with the login link) goes to standard error,
  // and what the program prints may name it too: both must be private.
  const bool output_private_ =
      DescriptorIsPrivate(STDOUT_FILENO) && DescriptorIsPrivate(STDERR_FILENO);
  std::mutex abort_mutex_;
  std::optional<AbortRequest> abort_;
  bool abort_handled_ = false;  // event-loop thread only
  bool terminating_ = false;
  std::chrono::steady_clock::time_point kill_deadline_{};
  std::optional<std::chrono::steady_clock::time_point> drain_deadline_;
  std::optional<std::chrono::steady_clock::time_point> failure_deadline_;
  std::optional<std::chrono::steady_clock::time_point> after_driver_deadline_;
  bool ending_after_driver_ = false;
  int exit_status_ = 0;
  int lost_status_ = 0;  // a lost node's rank's (128 + signal)
  bool status_requested_ = false;  // exit_status_ is a signal's or PMIx_Abort's
  int interrupted_by_ = 0;         // the signal whose 128 + n is exit_status_
  bool interrupt_received_ = false;  // one of interrupt_signals_, whatever the status
  // SIGINT, SIGTERM, SIGQUIT, and SIGHUP unless the caller ignored it
  // (nohup): read from the signalfd as interrupts.
  std::set<int> interrupt_signals_;
  OutputRelay output_;               // the ranks' output and this launcher's messages
  bool exit_by_signal_ = false;
};

}  // namespace

void EndBySignal(int signal) {
  std::cout.flush();
  std::cerr.flush();
  // Under `sray run` the signal is blocked (BlockSignals; the threads it
  // made have ended): raised while blocked, it is delivered once unblocked.
  // Elsewhere (`sray env`) it is delivered at the raise.
  // SIGQUIT's default action dumps core: after an orderly end there is
  // nothing to debug, and a core file would be left in the user's
  // directory. The status still says SIGQUIT.
  if (signal == SIGQUIT) {
    const rlimit no_core{.rlim_cur = 0, .rlim_max = 0};
    (void)::setrlimit(RLIMIT_CORE, &no_core);
    // Where core_pattern pipes to a handler (systemd-coredump, apport),
    // the limit is the handler's to honour; not dumpable, none runs.
    (void)::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  }
  std::signal(signal, SIG_DFL);
  std::raise(signal);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, signal);
  pthread_sigmask(SIG_UNBLOCK, &only, nullptr);
  std::_Exit(128 + signal);
}

Result<LocalJobEnd> RunLocalJob(const LocalJobRequest& request) {
  if (request.nodes == 0 || request.tasks_per_node == 0) {
    return Status::InvalidArgument("-N and --tasks-per-node must be at least 1");
  }
  LocalJob job(request);
  return job.Run();
}

}  // namespace sray::launcher
