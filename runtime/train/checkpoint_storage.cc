#include "train/checkpoint_storage.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <utility>

namespace sray::train::internal {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kPrefix = "checkpoint_";
constexpr std::string_view kPartialPrefix = ".checkpoint_partial_";

Status FromFilesystemError(const std::error_code& error, const std::string& what) {
  return Status::FromErrno(error.value(), what);
}

Status SyncPath(const std::string& path, bool directory) {
  const int descriptor = ::open(path.c_str(), (directory ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
  if (descriptor < 0) return Status::FromErrno(errno, "cannot open " + path + " to sync it");
  const int result = ::fsync(descriptor);
  const int saved = errno;
  ::close(descriptor);
  if (result != 0) return Status::FromErrno(saved, "cannot sync " + path);
  return Status::Ok();
}

bool SafeRelativePath(const std::string& path) {
  if (path.empty() || path.front() == '/') return false;
  for (const auto& part : fs::path(path)) {
    if (part == "..") return false;
  }
  return true;
}

std::optional<std::uint64_t> IndexOf(const std::string& name) {
  if (name.size() <= kPrefix.size() || name.compare(0, kPrefix.size(), kPrefix) != 0) return std::nullopt;
  std::uint64_t index = 0;
  for (std::size_t position = kPrefix.size(); position < name.size(); ++position) {
    const char digit = name[position];
    if (digit < '0' || digit > '9') return std::nullopt;
    index = index * 10 + static_cast<std::uint64_t>(digit - '0');
  }
  return index;
}

// Writes the files into `directory` (created here) and syncs each file and
// directory, so that a rename afterwards publishes complete contents.
Status WriteAndSync(const CheckpointFiles& files, const std::string& directory,
                    const std::function<void()>& after_each_file) {
  std::error_code error;
  if (fs::exists(directory, error)) {
    return Status::AlreadyExists("cannot write a checkpoint to " + directory + ": it exists already");
  }
  if (!fs::create_directories(directory, error) && error) {
    return FromFilesystemError(error, "cannot create checkpoint directory " + directory);
  }
  std::vector<std::string> directories{directory};
  for (const CheckpointFile& file : files.files) {
    if (!SafeRelativePath(file.path)) {
      return Status::InvalidArgument("checkpoint file name '" + file.path +
                                     "' leaves the checkpoint directory: it is refused");
    }
    const std::string target = directory + "/" + file.path;
    if (file.path.back() == '/') {
      fs::create_directories(target, error);
      if (error) return FromFilesystemError(error, "cannot create " + target);
      directories.push_back(target);
      continue;
    }
    fs::create_directories(fs::path(target).parent_path(), error);
    if (error) return FromFilesystemError(error, "cannot create the directory of " + target);
    const int descriptor = ::open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                                  static_cast<mode_t>(file.mode & 07777U) | S_IRUSR | S_IWUSR);
    if (descriptor < 0) return Status::FromErrno(errno, "cannot create " + target);
    std::size_t written = 0;
    while (written < file.data.size()) {
      const ssize_t result = ::write(descriptor, file.data.data() + written, file.data.size() - written);
      if (result < 0) {
        if (errno == EINTR) continue;
        const int saved = errno;
        ::close(descriptor);
        return Status::FromErrno(saved, "cannot write " + target);
      }
      written += static_cast<std::size_t>(result);
    }
    const int synced = ::fsync(descriptor);
    const int saved = errno;
    ::close(descriptor);
    if (synced != 0) return Status::FromErrno(saved, "cannot sync " + target);
    if (after_each_file) after_each_file();
  }
  // Deepest first, so that each directory's entries are durable before it.
  std::reverse(directories.begin(), directories.end());
  for (const std::string& entry : directories) SRAY_RETURN_IF_ERROR(SyncPath(entry, true));
  return Status::Ok();
}

}  // namespace

sray::Result<CheckpointFiles> ReadCheckpointDirectory(const std::string& directory) {
  std::error_code error;
  if (!fs::is_directory(directory, error)) {
    return Status::NotFound("checkpoint directory " + directory + " does not exist or is not a directory");
  }
  CheckpointFiles files;
  std::vector<fs::path> entries;
  for (fs::recursive_directory_iterator it(directory, error), end; !error && it != end; it.increment(error)) {
    entries.push_back(it->path());
  }
  if (error) return FromFilesystemError(error, "cannot list checkpoint directory " + directory);
  std::sort(entries.begin(), entries.end());
  for (const fs::path& entry : entries) {
    const std::string relative = entry.lexically_relative(directory).string();
    const fs::file_status status = fs::symlink_status(entry, error);
    if (error) return FromFilesystemError(error, "cannot inspect " + entry.string());
    const auto mode = static_cast<std::uint32_t>(status.permissions()) & 07777U;
    if (fs::is_directory(status)) {
      files.files.push_back({relative + "/", mode, {}});
      continue;
    }
    if (!fs::is_regular_file(status)) {
      return Status::InvalidArgument("checkpoint " + directory + " holds " + relative +
                                     ", which is not a regular file or directory: a checkpoint may "
                                     "hold only files and directories (copy the target instead of a link)");
    }
    const std::uintmax_t size = fs::file_size(entry, error);
    if (error) return FromFilesystemError(error, "cannot inspect " + entry.string());
    if (size > kLargestCheckpointFileBytes) {
      return Status::InvalidArgument(
          "checkpoint file " + relative + " is " + std::to_string(size) +
          " bytes, more than a reported checkpoint file may hold (4 GiB less one byte): save the "
          "state in several files (for example one per module, or the optimizer apart from the "
          "model)");
    }
    std::ifstream input(entry, std::ios::binary);
    if (!input) return Status::IoError("cannot read checkpoint file " + entry.string());
    std::string data((std::istreambuf_iterator<char>(input)), std::istreambuf_iterator<char>());
    if (input.bad()) return Status::IoError("cannot read checkpoint file " + entry.string());
    files.files.push_back({relative, mode, std::move(data)});
  }
  return files;
}

CheckpointFiles MergeCheckpointParts(std::vector<CheckpointFiles> parts) {
  CheckpointFiles merged;
  std::map<std::string, bool> taken;  // path without a trailing '/' -> is a directory
  for (CheckpointFiles& part : parts) {
    for (CheckpointFile& file : part.files) {
      const bool directory = !file.path.empty() && file.path.back() == '/';
      const std::string name = directory ? file.path.substr(0, file.path.size() - 1) : file.path;
      if (taken.contains(name)) continue;
      bool under_a_file = false;
      for (std::size_t slash = name.find('/'); slash != std::string::npos; slash = name.find('/', slash + 1)) {
        auto ancestor = taken.find(name.substr(0, slash));
        if (ancestor != taken.end() && !ancestor->second) under_a_file = true;
      }
      if (under_a_file) continue;
      taken.emplace(name, directory);
      merged.files.push_back(std::move(file));
    }
  }
  return merged;
}

Status WriteCheckpointDirectory(const CheckpointFiles& files, const std::string& directory) {
  return WriteAndSync(files, directory, {});
}

std::string CheckpointDirectoryName(std::uint64_t index) {
  char name[32];
  (void)std::snprintf(name, sizeof name, "checkpoint_%06llu", static_cast<unsigned long long>(index));
  return name;
}

std::vector<StoredCheckpoint> ListCheckpoints(const std::string& run_directory) {
  std::vector<StoredCheckpoint> found;
  std::error_code error;
  for (fs::directory_iterator it(run_directory, error), end; !error && it != end; it.increment(error)) {
    if (!it->is_directory(error)) continue;
    if (auto index = IndexOf(it->path().filename().string())) {
      found.push_back({*index, it->path().string()});
    }
  }
  std::sort(found.begin(), found.end(),
            [](const StoredCheckpoint& left, const StoredCheckpoint& right) { return left.index < right.index; });
  return found;
}

Status RemovePartialCheckpoints(const std::string& run_directory) {
  std::error_code error;
  std::vector<fs::path> partial;
  for (fs::directory_iterator it(run_directory, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.compare(0, kPartialPrefix.size(), kPartialPrefix) == 0) partial.push_back(it->path());
  }
  for (const auto& path : partial) {
    fs::remove_all(path, error);
    if (error) return FromFilesystemError(error, "cannot remove partial checkpoint " + path.string());
  }
  return Status::Ok();
}

sray::Result<std::string> StoreCheckpoint(const std::string& run_directory, std::uint64_t index,
                                    const CheckpointFiles& files,
                                    const std::function<void()>& after_each_file) {
  const std::string final_path = run_directory + "/" + CheckpointDirectoryName(index);
  const std::string partial = run_directory + "/" + std::string(kPartialPrefix) +
                              CheckpointDirectoryName(index).substr(kPrefix.size()) + "." +
                              std::to_string(::getpid());
  std::error_code error;
  fs::remove_all(partial, error);
  Status written = WriteAndSync(files, partial, after_each_file);
  if (!written.ok()) {
    fs::remove_all(partial, error);
    return written.WithContext("cannot store checkpoint " + CheckpointDirectoryName(index));
  }
  if (fs::exists(final_path, error)) {
    fs::remove_all(partial, error);
    return Status::AlreadyExists("cannot store checkpoint " + final_path +
                                 ": it exists already (two runs writing to one directory?)");
  }
  if (::rename(partial.c_str(), final_path.c_str()) != 0) {
    const int saved = errno;
    fs::remove_all(partial, error);
    return Status::FromErrno(saved, "cannot move checkpoint into place at " + final_path);
  }
  SRAY_RETURN_IF_ERROR(SyncPath(run_directory, true));
  return final_path;
}

Status RemoveCheckpoint(const std::string& path) {
  // Renamed away first, so that a crash halfway never leaves a damaged
  // directory under a checkpoint's name.
  const fs::path original(path);
  const std::string doomed = (original.parent_path() / (std::string(kPartialPrefix) + "removed_" +
                                                        original.filename().string()))
                                 .string();
  if (::rename(path.c_str(), doomed.c_str()) != 0) {
    return Status::FromErrno(errno, "cannot remove checkpoint " + path);
  }
  std::error_code error;
  fs::remove_all(doomed, error);
  if (error) return FromFilesystemError(error, "cannot remove checkpoint " + path);
  return Status::Ok();
}

Status ValidateCheckpointConfig(const CheckpointConfig& config) {
  if (config.num_to_keep < 0) {
    return Status::InvalidArgument("CheckpointConfig::num_to_keep is " + std::to_string(config.num_to_keep) +
                                   ": use 0 to keep every checkpoint, or a positive count");
  }
  if (config.score_order != "max" && config.score_order != "min") {
    return Status::InvalidArgument("CheckpointConfig::score_order is '" + config.score_order +
                                   R"(': use "max" or "min")");
  }
  return Status::Ok();
}

std::vector<RankedCheckpoint> BestFirst(std::vector<RankedCheckpoint> checkpoints,
                                        const CheckpointConfig& config) {
  const std::string& attribute = config.score_attribute;
  const bool higher_is_better = config.score_order != "min";
  std::stable_sort(checkpoints.begin(), checkpoints.end(),
                   [&](const RankedCheckpoint& left, const RankedCheckpoint& right) {
                     if (attribute.empty()) return left.index > right.index;
                     const auto left_score = left.metrics.find(attribute);
                     const auto right_score = right.metrics.find(attribute);
                     // A NaN score (a diverged run) ranks as no score: it
                     // compares equal to every number, which no sort allows.
                     const bool left_has =
                         left_score != left.metrics.end() && !std::isnan(left_score->second);
                     const bool right_has =
                         right_score != right.metrics.end() && !std::isnan(right_score->second);
                     if (left_has != right_has) return left_has;
                     if (!left_has || left_score->second == right_score->second) return left.index > right.index;
                     return higher_is_better ? left_score->second > right_score->second
                                             : left_score->second < right_score->second;
                   });
  return checkpoints;
}

std::vector<std::uint64_t> CheckpointsToRemove(const std::vector<RankedCheckpoint>& checkpoints,
                                               const CheckpointConfig& config) {
  if (config.num_to_keep <= 0 || checkpoints.size() <= static_cast<std::size_t>(config.num_to_keep)) return {};
  const std::uint64_t latest = checkpoints.back().index;
  const std::vector<RankedCheckpoint> ranked = BestFirst(checkpoints, config);
  std::vector<std::uint64_t> removed;
  std::size_t kept = 0;
  // The best num_to_keep stay, and the latest too when it is not among them
  // (as Ray Train does): a restart resumes from it.
  const bool latest_in_top = std::any_of(
      ranked.begin(), ranked.begin() + config.num_to_keep,
      [&](const RankedCheckpoint& checkpoint) { return checkpoint.index == latest; });
  const std::size_t others_to_keep = static_cast<std::size_t>(config.num_to_keep) - (latest_in_top ? 1 : 0);
  for (const RankedCheckpoint& checkpoint : ranked) {
    if (checkpoint.index == latest) continue;
    if (kept < others_to_keep) {
      ++kept;
    } else {
      removed.push_back(checkpoint.index);
    }
  }
  return removed;
}

}  // namespace sray::train::internal
