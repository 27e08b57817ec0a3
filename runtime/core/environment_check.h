#pragma once

// Before user code runs, the nodes of a step compare their conda
// environments (`--ray-cluster=env=`): each publishes its environment's
// lock (written by the job-setup library into the session directory) through
// PMIx, and a node whose lock differs from node 0's fails the step with the
// package differences. The lock is sray's text format (envs/lock.h), parsed
// here without the envs library so that libsray does not depend on it.
//
// Thread-safety: pure functions.

#include <cstdint>
#include <string>
#include <vector>

namespace sray::core {

inline constexpr const char* kEnvironmentLockKey = "sray.env.lock";

// "conda numpy: 1.26.0 py311h_1 on node 2, 1.26.0 py311h_0 on node 0", one
// line per package that differs; empty when the locks list the same packages.
std::vector<std::string> LockDifferences(const std::string& reference, std::uint32_t reference_node,
                                         const std::string& other, std::uint32_t other_node);

}  // namespace sray::core
