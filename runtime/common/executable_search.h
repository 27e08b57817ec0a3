#pragma once

// Finding a program on a PATH the way execvp does, for the launcher (the
// user's program, so a typo fails before anything starts) and for envs (the
// user's conda tool).
//
// Thread-safety: pure functions of the file system.

#include <filesystem>
#include <optional>
#include <string_view>

namespace sray {

// The first `directory/name` in `path_variable` (colon-separated; an empty
// entry means the working directory, as for execvp) that is an executable
// regular file.
std::optional<std::filesystem::path> FindExecutableOnPath(std::string_view name,
                                                          std::string_view path_variable);

// True for an executable regular file.
bool IsExecutableFile(const std::filesystem::path& path);

}  // namespace sray
