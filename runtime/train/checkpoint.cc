#include "sray/train/checkpoint.h"

#include <filesystem>

#include "sray/errors.h"
#include "train/checkpoint_storage.h"

namespace sray::train {

Checkpoint Checkpoint::FromDirectory(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_directory(path, error)) {
    throw ConfigError("sray: Checkpoint::FromDirectory: " + path +
                      " is not a directory: write the checkpoint's files into a directory first");
  }
  return Checkpoint(std::filesystem::absolute(path, error).string());
}

std::optional<Checkpoint> LatestCheckpoint(const std::string& run_directory) {
  const auto stored = internal::ListCheckpoints(run_directory);
  if (stored.empty()) return std::nullopt;
  return Checkpoint::FromDirectory(stored.back().path);
}

}  // namespace sray::train
