#pragma once

// What the kernel says of one process or thread in /proc/PID/stat (or
// /proc/PID/task/TID/stat): its state letter, its flags and when it started.
// One reader for every module that asks: the step sweep (alive? a kernel
// thread?), the step records and rendezvous files (with the pid, the start
// time names one process for good, since a pid may be reused), and the
// transport (is a thread of another process stopped?).
//
// Thread-safety: plain functions; they read /proc.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sray {

struct ProcessStat {
  char state = '?';              // field 3: R, S, D, T, t, Z, X, ...
  unsigned long flags = 0;       // field 9: PF_* bits
  std::uint64_t start_time = 0;  // field 22: clock ticks since boot
};

// The fields of one stat line. The command name (field 2) is in parentheses
// and may itself hold spaces and parentheses, so fields are counted from the
// last ')'. Nothing when the line is cut short or a field is not a number.
std::optional<ProcessStat> ParseProcessStat(std::string_view line);

// Reads and parses a stat file by its path; nothing when it is gone.
std::optional<ProcessStat> ReadProcessStat(const std::string& stat_path);

// /proc/PID/stat; nothing when there is no such process.
std::optional<ProcessStat> ReadProcessStat(pid_t pid);

// A stopped (T), traced (t) or uninterruptible (D) process or thread: it
// holds what it holds, and may go on later.
bool IsPausedState(char state);

// The start time of a running process; 0 when it does not exist or is a
// zombie or dead (it no longer runs).
std::uint64_t ProcessStartTime(pid_t pid);

}  // namespace sray
