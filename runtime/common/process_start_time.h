#pragma once

// When a process started, as the kernel counts it: with the pid, this names
// one process for good, since a pid alone may be reused after the process
// ends.
//
// Thread-safety: a plain function; reads /proc.

#include <sys/types.h>

#include <cstdint>

namespace sray {

// Field 22 of /proc/PID/stat, the start time in clock ticks since boot; 0
// when the process does not exist or is a zombie (it no longer runs).
std::uint64_t ProcessStartTime(pid_t pid);

}  // namespace sray
