#pragma once

// Whether the programs a process starts ignore SIGPIPE: what exec passes on
// from the process's disposition (tasks_check basic, the BrokenPipe unit tests).

#include <signal.h>
#include <stdio.h>

#include <cstdint>
#include <cstdio>

namespace sray::check {

// 1 when a program started from this process ignores SIGPIPE (its SigIgn
// mask in /proc), 0 when not, -1 when that cannot be read.
inline std::int64_t ChildIgnoresSigpipe() {
  FILE* child = ::popen("exec grep '^SigIgn:' /proc/self/status", "r");
  if (child == nullptr) return -1;
  char line[128] = {};
  const bool read = std::fgets(line, sizeof line, child) != nullptr;
  ::pclose(child);
  unsigned long long ignored = 0;
  if (!read || std::sscanf(line, "SigIgn: %llx", &ignored) != 1) return -1;
  return static_cast<std::int64_t>((ignored >> (SIGPIPE - 1)) & 1U);
}

}  // namespace sray::check
