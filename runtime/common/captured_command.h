#pragma once

// Runs a short-lived command and keeps what it prints: `squeue` and
// `scontrol` for the tools, bash sourcing an environment's activate.d
// scripts. One place for the pipes, the spawn and the wait, so that each
// caller gets the same care: every signal unblocked in the child (a caller
// that blocks INT for a signalfd must not hand that to the command; a
// signal the caller ignores, as nohup does, stays ignored), stdin
// from /dev/null where asked, a deadline that kills, reads bounded.
//
// Thread-safety: RunCapturing may be called from any thread; it waits for
// its own child only (waitpid on its pid).

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace sray {

struct CapturedCommand {
  // argv[0] is the program's path (not searched on PATH).
  std::vector<std::string> argv;
  // NAME=VALUE entries; nothing: this process's environment.
  std::optional<std::vector<std::string>> environment;
  // Standard error kept too; otherwise it goes where this process's goes.
  bool capture_errors = false;
  // Standard input from /dev/null; otherwise this process's.
  bool no_input = false;
  // Killed (SIGKILL) when it has not ended by then, output closed or not;
  // nothing: waited for however long it runs (the caller's signals end it).
  std::optional<std::chrono::milliseconds> limit;
  // Each stream keeps at most this many bytes; the rest is read and dropped.
  std::size_t most_bytes = std::size_t{64} << 20;
};

struct CommandOutcome {
  int wait_status = 0;  // as waitpid gives it
  bool timed_out = false;
  bool cut_short = false;  // a stream printed more than most_bytes
  std::string output;
  std::string errors;

  [[nodiscard]] bool ExitedWith(int code) const;
  // "exit status N", "killed by signal N (name)", "ran past its time limit".
  [[nodiscard]] std::string How() const;
};

// Fails when the command could not be started or waited for (SIGCHLD
// ignored by whoever started this process: ECHILD).
Result<CommandOutcome> RunCapturing(const CapturedCommand& command);

}  // namespace sray
