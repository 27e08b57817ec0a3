#pragma once

// What lets a worker host another actor after its actor was killed: the
// process must look as it did before the actor's constructor (no thread of
// the actor's left, memory back near where it was) and nothing in it asked
// to end with the actor (internal::EndProcessWithActor). Otherwise the
// worker ends its process, as every killed actor's did before reuse.
//
// Thread-safety: RetiredActors is safe from any thread; the rest are plain
// functions of the calling process.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "common/recent_ids.h"

namespace sray::core {

struct ProcessSnapshot {
  std::size_t threads = 0;
  std::uint64_t resident_bytes = 0;
};

// This process's threads and resident memory, from /proc/self.
ProcessSnapshot TakeProcessSnapshot();

// How much more resident memory than before the constructor a reused
// worker may keep (what malloc holds on to, pages the actor's code touched).
inline constexpr std::uint64_t kReusableResidentGrowth = 16ull << 20;
// How long a killed actor's destructor may run before its process ends.
inline constexpr std::chrono::seconds kDestructorLimit{1};

// Why the process cannot host another actor, compared with `before` (taken
// before the constructor ran), or nothing when it can.
std::optional<std::string> WhyNotReusable(const ProcessSnapshot& before,
                                          const ProcessSnapshot& now, bool ends_with_actor);

// Runs `destroy` on this thread; ends the process with exit code 1 when it
// has not returned within `limit` (a destructor that hangs must not keep
// the actor's process, or its resources, after Kill).
void RunWithin(std::chrono::milliseconds limit, const std::function<void()>& destroy);

// The actors this process served: late calls to them are dropped. Holds the
// latest kRetiredActorsKept (calls come late by milliseconds, not by
// thousands of actors).
using RetiredActors = RecentIds;
inline constexpr std::size_t kRetiredActorsKept = 4'096;

}  // namespace sray::core
