#pragma once

// What a step keeps in a node's /dev/shm, and its removal. Two kinds of files
// live there: the object store's ("sray.<job>.<step>.n<node>.<object>") and
// UCX's shared-memory segments, which every task is told (UCX_POSIX_DIR) to
// create in a directory of the node's own ("sray.<job>.<step>.n<node>.ucx")
// instead of as loose ucx_shm_posix_* files. Processes that die before their
// destructors run (kill -9, scancel, an interrupted launcher, a worker killed
// while UCX sets up) leave such files behind, and /dev/shm is memory taken
// from the node's next job; so the step's teardown on each node removes every
// entry under that node's prefix. The prefix names job, step and node, which
// keeps the teardown off other steps and off other emulated nodes sharing the
// machine's /dev/shm.
//
// Thread-safety: functions are independent; the callers own the files.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "common/status.h"

namespace sray::jobsetup {

inline constexpr std::string_view kSharedMemoryDirectory = "/dev/shm";

// "sray.<job>.<step>.n<node>": the names of the node's objects start with it
// and a dot.
std::string NodeSharedMemoryPrefix(std::string_view job_id, std::string_view step_id,
                                   std::uint32_t node_id);

// <directory>/<prefix>.ucx, where the node's tasks have UCX put its segments.
std::filesystem::path UcxSegmentDirectory(const std::filesystem::path& directory,
                                          std::string_view prefix);

// Creates the UCX segment directory with mode 0700 as the calling user; an
// existing one must be a mode-0700 directory of `owner` (another user could
// have planted it to read the step's traffic).
Status CreateUcxSegmentDirectory(const std::filesystem::path& path, uid_t owner);

// Removes every entry of `directory` named "<prefix>." followed by anything
// (directories with their contents, symbolic links themselves) that belongs
// to the caller, and returns how many entries went. Entries that vanish
// meanwhile are not errors; another user's are left alone.
Result<std::size_t> RemoveNodeSharedMemory(const std::filesystem::path& directory,
                                           std::string_view prefix);

}  // namespace sray::jobsetup
