#pragma once

// sray's canonical lock of an environment: every package with name,
// version, build, channel, subdir and checksum, one per line, sorted, and
// the SHA-256 of those lines (the environment's content hash, which the
// nodes of a step compare). Text, so it diffs and reviews well:
//
//   # sray environment lock v1
//   # sha256 <hex of the package lines>
//   conda python 3.11.5 hab00c5b_0_cpython conda-forge linux-64 md5:...
//   pip requests 2.31.0 - pypi - -
//
// Thread-safety: pure functions.

#include <filesystem>
#include <string>
#include <string_view>

#include "common/status.h"
#include "envs/package.h"

namespace sray::envs {

inline constexpr std::string_view kLockHeader = "# sray environment lock v1";

struct Lock {
  std::string text;  // the whole file
  std::string hash;  // hex SHA-256 of the package lines
};

// Fails for a list that does not pin every package (--from-history,
// --no-builds): lock a prefix or a complete export instead.
Result<Lock> MakeLock(const PackageList& list);
Result<PackageList> ReadLock(const std::filesystem::path& file);

// Hex SHA-256 of `bytes`.
std::string Sha256Hex(std::string_view bytes);

}  // namespace sray::envs
