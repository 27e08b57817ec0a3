#pragma once

// A packed environment: one file holding a prefix's tree (files, directories,
// symbolic links, modes), the prefix it was packed from, and its lock hash,
// so it can be unpacked anywhere with the recorded prefix rewritten (as
// conda-pack does):
// - text files: every occurrence of the old prefix becomes the new one;
// - binary files (those with a NUL byte): each C string holding the old
//   prefix is rewritten in place and padded with NULs, which needs a new
//   prefix no longer than the old; a longer one is refused, naming a file;
// - absolute symbolic links into the old prefix point into the new one.
// The file ends with an entry count and a SHA-256 of everything before it,
// so a truncated or damaged pack is refused before anything is unpacked.
// Unpacking writes a sibling directory and renames it into place: a crash
// never leaves a half-unpacked environment at the target.
//
// Thread-safety: functions of their arguments and the file system.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "common/status.h"
#include "envs/interrupted.h"

namespace sray::envs {

struct PackSummary {
  std::string recorded_prefix;
  std::string lock_hash;
  std::uint64_t files = 0;
  std::uint64_t bytes = 0;
  std::uint64_t relocated_files = 0;  // files holding the prefix
};

// Writes OUTPUT.partial and renames it to OUTPUT once whole: a pack that
// fails or is interrupted (`interrupted`, asked between files) removes the
// partial file and leaves any earlier OUTPUT as it was.
Result<PackSummary> Pack(const std::filesystem::path& prefix, const std::filesystem::path& output,
                         const Interrupted& interrupted = {});
// Reads only the header: what Unpack would install, and its lock hash.
Result<PackSummary> InspectPack(const std::filesystem::path& pack);
// How far an Unpack is: files and bytes written so far. Told after every
// file, on the unpacking thread (throttle there).
struct UnpackProgress {
  std::uint64_t files = 0;
  std::uint64_t bytes = 0;
};
using UnpackObserver = std::function<void(const UnpackProgress&)>;
// Unpacks into .TARGET.unpacking.PID beside TARGET, holding an flock on
// it, and renames it once whole; a failed or interrupted unpack removes it,
// and the next unpack beside TARGET removes those nobody holds (their
// unpack was killed with SIGKILL, which nothing in the process can handle).
Result<PackSummary> Unpack(const std::filesystem::path& pack, const std::filesystem::path& target,
                           const UnpackObserver& observer = {},
                           const Interrupted& interrupted = {});

// Removes from `directory` the staging directories (.NAME.unpacking.PID) of
// unpacks nobody holds, of any target; returns how many.
std::uint64_t RemoveStagingOfKilledUnpacks(const std::filesystem::path& directory);

}  // namespace sray::envs
