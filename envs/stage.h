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
#include <optional>
#include <string>

#include "common/status.h"
#include "envs/create.h"
#include "envs/pack.h"

namespace sray::envs {

struct StagedEnvironment {
  std::filesystem::path prefix;
  std::string lock_hash;
  bool reused = false;        // another job staged it already
  std::uint64_t evicted = 0;  // copies removed to stay under the limit
};

// `observer` sees the unpacking, when this call unpacks (not when it reuses
// a staged copy).
Result<StagedEnvironment> StagePack(const std::filesystem::path& pack,
                                    const std::filesystem::path& cache_root,
                                    std::uint64_t cache_limit_bytes,
                                    const UnpackObserver& observer = {},
                                    const Interrupted& interrupted = {});

// An environment described by a spec (environment.yml, explicit file,
// conda-lock.yml, sray lock) in the same cache: a staged copy that matches
// the spec exactly (envs/verify.h) is reused, the most recently used first;
// otherwise `conda_tool` (micromamba, mamba or conda) creates one in the cache
// under the same lock, its output in <cache>/<key>.log, and a copy that fails
// or does not match the spec is removed. Without a match and without a tool,
// fails naming the ways to provide the environment. `observer` sees the
// tool's progress, when this call creates the environment; the tool's
// environment gets `tool_environment` (CreateEnvironment).
Result<StagedEnvironment> StageSpec(const std::filesystem::path& spec_file,
                                    const std::filesystem::path& cache_root,
                                    std::uint64_t cache_limit_bytes,
                                    const std::optional<std::filesystem::path>& conda_tool,
                                    const CreateObserver& observer = {},
                                    const Interrupted& interrupted = {},
                                    const std::vector<std::string>& tool_environment = {});

}  // namespace sray::envs
