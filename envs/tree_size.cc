#include "envs/tree_size.h"

namespace sray::envs {

TreeSize MeasureTree(const std::filesystem::path& root) {
  TreeSize size;
  std::error_code error;
  for (std::filesystem::recursive_directory_iterator it(root, error), end; !error && it != end;
       it.increment(error)) {
    std::error_code entry_error;
    if (!it->is_regular_file(entry_error) || it->is_symlink(entry_error)) continue;
    // A file the tool removed meanwhile has no size: skipped, not counted
    // as (uintmax_t)-1 bytes.
    const auto bytes = it->file_size(entry_error);
    if (entry_error) continue;
    ++size.files;
    size.bytes += bytes;
  }
  return size;
}

}  // namespace sray::envs
