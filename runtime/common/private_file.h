#pragma once

// Files and directories only their owner may use.
//
// Thread-safety: plain functions; two writers of one path race on .tmp.

#include <sys/types.h>

#include <filesystem>
#include <string_view>

#include "common/status.h"

namespace sray {

// Writes a file only its owner may read (mode 0600), whole or not at all:
// the text goes to PATH.tmp (never through a symbolic link), then is
// renamed over PATH, so a reader sees the old file or the new one.
Status WritePrivateFile(const std::filesystem::path& path, std::string_view text);

// Creates the directory `path` with mode 0700 as the calling user. An
// existing one is accepted only when it is a real directory owned by `owner`
// with mode 0700 (set-up code may run twice); anything else is refused rather
// than trusted, since another user could have planted it. `what` names the
// directory in messages ("session directory").
Status CreatePrivateDirectory(const std::filesystem::path& path, uid_t owner,
                              std::string_view what);

// The same for the last component of `path`, after creating its missing
// parents as usual (the session directory above it is private already).
Status CreatePrivateDirectoryIn(const std::filesystem::path& path, uid_t owner, std::string_view what);

// Like CreatePrivateDirectoryIn, for a directory a user may have made
// themselves (a cache they name): an existing one of `owner` with a wider
// mode is narrowed to 0700, as long as no group or other user could write
// into it; one another user owns or could have written into is refused.
Status AdoptPrivateDirectoryIn(const std::filesystem::path& path, uid_t owner,
                               std::string_view what);

}  // namespace sray
