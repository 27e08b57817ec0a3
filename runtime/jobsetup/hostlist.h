#pragma once

// Expands Slurm hostlist expressions ("n[1-3],gpu[01-02]-ib") into host names,
// in order. Written here rather than borrowed from libslurm because the SPANK
// plugin must not depend on which libslurm symbols its host process exports.
// Thread-safety: pure function.

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace sray::jobsetup {

// Expansion stops with an error past this many names: a typo such as
// n[1-99999999] must not exhaust memory.
inline constexpr std::size_t kMaxHostlistNames = 1U << 20;

Result<std::vector<std::string>> ExpandHostlist(std::string_view hostlist);

}  // namespace sray::jobsetup
