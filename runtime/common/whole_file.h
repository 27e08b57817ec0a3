#pragma once

// Reads a whole file with plain read(2): no stream, one allocation that
// grows. For /proc files, whose size stat(2) does not tell, read by every
// process as it starts (/proc/self/maps) or many times a second
// (/proc/PID/stat).
//
// Thread-safety: none needed; no shared state.

#include <optional>
#include <string>

namespace sray {

// The file's bytes, or nullopt when it cannot be opened or read (a process
// that ended: its /proc entry is gone).
std::optional<std::string> ReadWholeFile(const std::string& path);

}  // namespace sray
