#include "common/executable_search.h"

#include <sys/stat.h>
#include <unistd.h>

#include <string>

namespace sray {

bool IsExecutableFile(const std::filesystem::path& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

std::optional<std::filesystem::path> FindExecutableOnPath(std::string_view name,
                                                          std::string_view path_variable) {
  std::size_t start = 0;
  while (start <= path_variable.size()) {
    const std::size_t end = std::min(path_variable.find(':', start), path_variable.size());
    const std::string_view directory = path_variable.substr(start, end - start);
    const std::filesystem::path candidate =
        std::filesystem::path(directory.empty() ? "." : std::string(directory)) / name;
    if (IsExecutableFile(candidate)) return candidate;
    start = end + 1;
  }
  return std::nullopt;
}

}  // namespace sray
