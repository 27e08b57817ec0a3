#include "train/checkpoint_storage.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
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
// Staged parts carry the partial prefix too: every sweep of partial
// directories takes the staged parts no store took.
constexpr std::string_view kStagedPrefix = ".checkpoint_partial_staged_";

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

// Writes one file (which must not exist) and syncs it.
Status WriteFile(const std::string& target, std::uint32_t mode, const std::string& data) {
  const int descriptor = ::open(target.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                                static_cast<mode_t>(mode & 07777U) | S_IRUSR | S_IWUSR);
  if (descriptor < 0) return Status::FromErrno(errno, "cannot create " + target);
  std::size_t written = 0;
  while (written < data.size()) {
    const ssize_t result = ::write(descriptor, data.data() + written, data.size() - written);
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
  return Status::Ok();
}

// Each directory of `directories` synced, deepest (latest listed) first, so
// that each directory's entries are durable before it.
Status SyncDirectories(std::vector<std::string> directories) {
  std::reverse(directories.begin(), directories.end());
  for (const std::string& entry : directories) SRAY_RETURN_IF_ERROR(SyncPath(entry, true));
  return Status::Ok();
}

// One entry of a checkpoint directory on disk.
struct DirectoryEntry {
  fs::path path;
  std::string relative;  // a directory's ends in '/'
  std::uint32_t mode = 0;
  std::uintmax_t size = 0;
};

// The entries of a checkpoint directory, sorted by path: regular files and
// directories only (a symlink or device is refused by name).
sray::Result<std::vector<DirectoryEntry>> ListEntries(const std::string& directory) {
  std::error_code error;
  if (!fs::is_directory(directory, error)) {
    return Status::NotFound("checkpoint directory " + directory +
                            " does not exist or is not a directory");
  }
  std::vector<fs::path> paths;
  for (fs::recursive_directory_iterator it(directory, error), end; !error && it != end;
       it.increment(error)) {
    paths.push_back(it->path());
  }
  if (error) return FromFilesystemError(error, "cannot list checkpoint directory " + directory);
  std::sort(paths.begin(), paths.end());
  std::vector<DirectoryEntry> entries;
  for (const fs::path& path : paths) {
    const std::string relative = path.lexically_relative(directory).string();
    const fs::file_status status = fs::symlink_status(path, error);
    if (error) return FromFilesystemError(error, "cannot inspect " + path.string());
    const auto mode = static_cast<std::uint32_t>(status.permissions()) & 07777U;
    if (fs::is_directory(status)) {
      entries.push_back({path, relative + "/", mode, 0});
      continue;
    }
    if (!fs::is_regular_file(status)) {
      return Status::InvalidArgument(
          "checkpoint " + directory + " holds " + relative +
          ", which is not a regular file or directory: a checkpoint may "
          "hold only files and directories (copy the target instead of a link)");
    }
    const std::uintmax_t size = fs::file_size(path, error);
    if (error) return FromFilesystemError(error, "cannot inspect " + path.string());
    entries.push_back({path, relative, mode, size});
  }
  return entries;
}

// Which entries of several parts make one checkpoint: the first part to
// give a path keeps it, and nothing goes under an earlier part's file.
class MergedNames {
 public:
  // `path` ends in '/' for a directory.
  bool Take(const std::string& path) {
    const bool directory = !path.empty() && path.back() == '/';
    const std::string name = directory ? path.substr(0, path.size() - 1) : path;
    if (taken_.contains(name)) return false;
    for (std::size_t slash = name.find('/'); slash != std::string::npos;
         slash = name.find('/', slash + 1)) {
      auto ancestor = taken_.find(name.substr(0, slash));
      if (ancestor != taken_.end() && !ancestor->second) return false;
    }
    taken_.emplace(name, directory);
    return true;
  }

 private:
  std::map<std::string, bool> taken_;  // path without a trailing '/' -> is a directory
};

// A part without a copy of its files: `files` when `staged` is empty.
struct PartView {
  const CheckpointFiles* files = nullptr;
  std::string staged;
};

// Writes the merged parts into `directory` (created here) and syncs each
// file and directory, so that a rename afterwards publishes complete
// contents. A staged part's files are renamed in (they were synced as they
// were staged, and the rename is on the same file system).

Status WriteAndSync(const std::vector<PartView>& parts, const std::string& run_directory,
                    const std::string& directory, const std::function<void()>& after_each_file) {
  std::error_code error;
  if (fs::exists(directory, error)) {
    return Status::AlreadyExists("cannot write a checkpoint to " + directory + ": it exists already");
  }
  if (!fs::create_directories(directory, error) && error) {
    return FromFilesystemError(error, "cannot create checkpoint directory " + directory);
  }
  std::vector<std::string> directories{directory};
  MergedNames names;
  const auto make_directory = [&](const std::string& target) -> Status {
    fs::create_directories(target, error);
    if (error) return FromFilesystemError(error, "cannot create " + target);
    directories.push_back(target);
    return Status::Ok();
  };
  const auto make_parent = [&](const std::string& target) -> Status {
    fs::create_directories(fs::path(target).parent_path(), error);
    if (error) return FromFilesystemError(error, "cannot create the directory of " + target);
    return Status::Ok();
  };
  // One entry of a part: skipped where the merge says so, else its
  // directory made, or its file put in place by `place`.
  const auto add = [&](const std::string& relative,
                       const std::function<Status(const std::string& target)>& place) -> Status {
    if (!names.Take(relative)) return Status::Ok();
    const std::string target = directory + "/" + relative;
    if (relative.back() == '/') return make_directory(target);
    SRAY_RETURN_IF_ERROR(make_parent(target));
    SRAY_RETURN_IF_ERROR(place(target));
    if (after_each_file) after_each_file();
    return Status::Ok();
  };
  for (const PartView& part : parts) {
    if (part.staged.empty()) {
      for (const CheckpointFile& file : part.files->files) {
        if (!SafeRelativePath(file.path)) {
          return Status::InvalidArgument("checkpoint file name '" + file.path +
                                         "' leaves the checkpoint directory: it is refused");
        }
        SRAY_RETURN_IF_ERROR(add(file.path, [&](const std::string& target) {
          return WriteFile(target, file.mode, file.data);
        }));
      }
      continue;
    }
    auto entries = ListEntries(run_directory + "/" + part.staged);
    if (!entries.ok()) return entries.status();
    for (const DirectoryEntry& entry : *entries) {
      SRAY_RETURN_IF_ERROR(add(entry.relative, [&](const std::string& target) {
        if (::rename(entry.path.c_str(), target.c_str()) == 0) return Status::Ok();
        return Status::FromErrno(errno,
                                 "cannot move " + entry.path.string() + " into the checkpoint");
      }));
    }
  }
  return SyncDirectories(std::move(directories));
}

Status CopyInto(const std::vector<DirectoryEntry>& entries, const std::string& to) {
  std::error_code error;
  if (fs::exists(to, error))
    return Status::AlreadyExists("cannot copy a checkpoint to " + to + ": it exists already");
  if (!fs::create_directories(to, error) && error)
    return FromFilesystemError(error, "cannot create " + to);
  std::vector<std::string> directories{to};
  for (const DirectoryEntry& entry : entries) {
    const std::string target = to + "/" + entry.relative;
    if (entry.relative.back() == '/') {
      fs::create_directories(target, error);
      if (error) return FromFilesystemError(error, "cannot create " + target);
      directories.push_back(target);
      continue;
    }
    fs::create_directories(fs::path(target).parent_path(), error);
    if (error) return FromFilesystemError(error, "cannot create the directory of " + target);
    fs::copy_file(entry.path, target, fs::copy_options::none, error);
    if (error)
      return FromFilesystemError(error, "cannot copy " + entry.path.string() + " to " + target);
    SRAY_RETURN_IF_ERROR(SyncPath(target, false));
  }
  return SyncDirectories(std::move(directories));
}

}  // namespace

sray::Result<CheckpointFiles> ReadCheckpointDirectory(const std::string& directory) {
  auto entries = ListEntries(directory);
  if (!entries.ok()) return entries.status();
  CheckpointFiles files;
  for (const DirectoryEntry& entry : *entries) {
    if (entry.relative.back() == '/') {
      files.files.push_back({entry.relative, entry.mode, {}});
      continue;
    }
    if (entry.size > kLargestCheckpointFileBytes) {
      return Status::InvalidArgument(
          "checkpoint file " + entry.relative + " is " + std::to_string(entry.size) +
          " bytes, more than a checkpoint sent to the driver may hold (4 GiB less one byte): give "
          "RunConfig::storage_path a directory every worker's node sees (a shared file system), "
          "where checkpoints are copied there instead of sent, or save the state in several files "
          "(for example one per module, or the optimizer apart from the model)");
    }
    std::ifstream input(entry.path, std::ios::binary);
    if (!input) return Status::IoError("cannot read checkpoint file " + entry.path.string());
    std::string data((std::istreambuf_iterator<char>(input)), std::istreambuf_iterator<char>());
    if (input.bad()) return Status::IoError("cannot read checkpoint file " + entry.path.string());
    files.files.push_back({entry.relative, entry.mode, std::move(data)});
  }
  return files;
}

Status CopyCheckpointDirectory(const std::string& from, const std::string& to) {
  auto entries = ListEntries(from);
  if (!entries.ok()) return entries.status();
  Status copied = CopyInto(*entries, to);
  if (!copied.ok()) {
    std::error_code ignored;
    fs::remove_all(to, ignored);
  }
  return copied;
}

sray::Result<std::string> StageCheckpointDirectory(const std::string& from,
                                                   const std::string& run_directory,
                                                   const std::string& label) {
  const bool plain = !label.empty() && std::all_of(label.begin(), label.end(), [](char character) {
    return std::isalnum(static_cast<unsigned char>(character)) != 0 || character == '_' ||
           character == '-';
  });
  if (!plain)
    return Status::InvalidArgument(
        "a staged checkpoint's label must be letters, digits, '_' and '-': '" + label + "'");
  const std::string name = std::string(kStagedPrefix) + label;
  const std::string to = run_directory + "/" + name;
  std::error_code ignored;
  fs::remove_all(to, ignored);
  SRAY_RETURN_IF_ERROR(CopyCheckpointDirectory(from, to));
  // Its entry in the run directory, durable before the driver hears of it.
  SRAY_RETURN_IF_ERROR(SyncPath(run_directory, true));
  return name;
}

Status WriteStorageMarker(const std::string& run_directory, const std::string& token) {
  const std::string marker = run_directory + "/" + std::string(kStorageMarkerName);
  std::error_code ignored;
  fs::remove(marker, ignored);
  return WriteFile(marker, 0600, token);
}

bool SeesStorageMarker(const std::string& run_directory, const std::string& token) {
  if (run_directory.empty() || token.empty()) return false;
  std::ifstream input(run_directory + "/" + std::string(kStorageMarkerName), std::ios::binary);
  if (!input) return false;
  const std::string content((std::istreambuf_iterator<char>(input)),
                            std::istreambuf_iterator<char>());
  return content == token;
}

Status RemoveStorageMarker(const std::string& run_directory) {
  std::error_code error;
  fs::remove(run_directory + "/" + std::string(kStorageMarkerName), error);
  if (error)
    return FromFilesystemError(error, "cannot remove the storage marker in " + run_directory);
  return Status::Ok();
}

Status WriteCheckpointDirectory(const CheckpointFiles& files, const std::string& directory) {
  return WriteAndSync({PartView{&files, {}}}, {}, directory, {});
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

namespace {

sray::Result<std::string> StoreParts(const std::string& run_directory, std::uint64_t index,
                                     const std::vector<PartView>& parts,
                                     const std::function<void()>& after_each_file) {
  struct RemoveStagedAtEnd {
    std::vector<std::string> directories;
    ~RemoveStagedAtEnd() {
      std::error_code ignored;
      for (const std::string& directory : directories) fs::remove_all(directory, ignored);
    }
  } staged;
  for (const PartView& part : parts) {
    if (part.staged.empty()) continue;
    if (part.staged.find('/') != std::string::npos || !part.staged.starts_with(kStagedPrefix)) {
      return Status::InvalidArgument("'" + part.staged +
                                     "' is not the name of a staged checkpoint part");
    }
    staged.directories.push_back(run_directory + "/" + part.staged);
  }
  const std::string final_path = run_directory + "/" + CheckpointDirectoryName(index);
  const std::string partial = run_directory + "/" + std::string(kPartialPrefix) +
                              CheckpointDirectoryName(index).substr(kPrefix.size()) + "." +
                              std::to_string(::getpid());
  std::error_code error;
  fs::remove_all(partial, error);
  Status written = WriteAndSync(parts, run_directory, partial, after_each_file);
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

}  // namespace

sray::Result<std::string> StoreCheckpoint(const std::string& run_directory, std::uint64_t index,
                                          const CheckpointFiles& files,
                                          const std::function<void()>& after_each_file) {
  return StoreParts(run_directory, index, {PartView{&files, {}}}, after_each_file);
}

sray::Result<std::string> StoreCheckpointParts(const std::string& run_directory,
                                               std::uint64_t index,
                                               std::vector<CheckpointPart> parts,
                                               const std::function<void()>& after_each_file) {
  std::vector<PartView> views;
  views.reserve(parts.size());
  for (const CheckpointPart& part : parts) views.push_back({&part.files, part.staged});
  return StoreParts(run_directory, index, views, after_each_file);
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
