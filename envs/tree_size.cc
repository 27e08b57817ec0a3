#include "envs/tree_size.h"

namespace sray::envs {

TreeSize MeasureTree(const std::filesystem::path& root) {
  TreeSize size;
  std::error_code error;
  for (std::filesystem::recursive_directory_iterator it(root, error), end; !error && it != end;
       it.increment(error)) {
    if (it->is_regular_file(error) && !it->is_symlink(error)) {
      ++size.files;
      size.bytes += it->file_size(error);
    }
  }
  return size;
}

}  // namespace sray::envs
