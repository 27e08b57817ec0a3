#pragma once

// Writes a file only its owner may read (mode 0600), whole or not at all:
// the text goes to PATH.tmp (never through a symbolic link), then is
// renamed over PATH, so a reader sees the old file or the new one.
//
// Thread-safety: a plain function; two writers of one path race on .tmp.

#include <filesystem>
#include <string_view>

#include "common/status.h"

namespace sray {

Status WritePrivateFile(const std::filesystem::path& path, std::string_view text);

}  // namespace sray
