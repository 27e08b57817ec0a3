#pragma once

// Deadlines from caller-given timeouts. A timeout such as
// std::chrono::milliseconds::max() ("as long as it takes") added to now
// overflows the steady clock's nanoseconds and lands in the past, which made
// Get, Wait and PlacementGroup::Wait give up at once.
//
// Thread-safety: pure functions.

#include <chrono>
#include <optional>

namespace sray {

// `timeout` from now, or the farthest time the steady clock holds when that
// is past it. A negative timeout is a time already past.
inline std::chrono::steady_clock::time_point DeadlineAfter(std::chrono::milliseconds timeout) {
  const auto now = std::chrono::steady_clock::now();
  const auto room = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::time_point::max() - now);
  if (timeout >= room) return std::chrono::steady_clock::time_point::max();
  return now + timeout;
}

// No timeout: no deadline.
inline std::chrono::steady_clock::time_point DeadlineAfter(
    const std::optional<std::chrono::milliseconds>& timeout) {
  return timeout ? DeadlineAfter(*timeout) : std::chrono::steady_clock::time_point::max();
}

}  // namespace sray
