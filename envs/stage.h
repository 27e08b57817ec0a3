#pragma once

// Stages a packed environment into a node-local cache, once per node: the
// cache holds one directory per lock hash (so every job needing the same
// environment shares one copy), a lock file serialises staging between
// concurrent jobs (flock: released by the kernel if a job dies), unpacking
// goes through a sibling directory and a rename (never a half-unpacked
// copy), and the least recently used copies are removed while the cache is
// over its size limit.
//
// Thread-safety: safe across processes (the lock file); within a process,
// callers serialise.

#include <cstdint>
#include <filesystem>
#include <string>

#include "common/status.h"

namespace sray::envs {

struct StagedEnvironment {
  std::filesystem::path prefix;
  std::string lock_hash;
  bool reused = false;           // another job staged it already
  std::uint64_t evicted = 0;     // copies removed to stay under the limit
};

Result<StagedEnvironment> StagePack(const std::filesystem::path& pack,
                                    const std::filesystem::path& cache_root,
                                    std::uint64_t cache_limit_bytes);

}  // namespace sray::envs
