#pragma once

// What a directory tree holds: its regular files (symlinks not followed)
// and their bytes. Unreadable parts are skipped: the size is for progress
// lines and the staged copy's marker, never a check.
//
// Thread-safety: a pure function over the file system.

#include <cstdint>
#include <filesystem>

namespace sray::envs {

struct TreeSize {
  std::uint64_t files = 0;
  std::uint64_t bytes = 0;
};

TreeSize MeasureTree(const std::filesystem::path& root);

}  // namespace sray::envs
