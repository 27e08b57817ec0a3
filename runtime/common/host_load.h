#pragma once

// How loaded a node's machine is, for the dashboard: the kernel's load
// average and memory (/proc/loadavg, /proc/meminfo), and what processes hold
// resident (/proc/PID/statm). Values that cannot be read are left at their
// defaults rather than failing a status request.
//
// Thread-safety: pure reads of /proc.

#include <sys/types.h>

#include <cstdint>

namespace sray {

struct HostLoad {
  double load_average_1m = -1;  // -1: unknown
  std::uint64_t memory_total_bytes = 0;
  std::uint64_t memory_available_bytes = 0;
};

HostLoad ReadHostLoad();

// 0 when the process is gone.
std::uint64_t ResidentBytes(pid_t pid);

}  // namespace sray
