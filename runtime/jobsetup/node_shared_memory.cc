#include "jobsetup/node_shared_memory.h"

#include <sys/stat.h>
#include <unistd.h>

#include <system_error>

#include "common/private_file.h"

namespace sray::jobsetup {

std::string NodeSharedMemoryPrefix(std::string_view job_id, std::string_view step_id,
                                   std::uint32_t node_id) {
  return "sray." + std::string(job_id) + "." + std::string(step_id) + ".n" +
         std::to_string(node_id);
}

std::filesystem::path UcxSegmentDirectory(const std::filesystem::path& directory,
                                          std::string_view prefix) {
  return directory / (std::string(prefix) + ".ucx");
}

Status CreateUcxSegmentDirectory(const std::filesystem::path& path, uid_t owner) {
  return CreatePrivateDirectory(path, owner, "UCX shared-memory directory");
}

Result<std::size_t> RemoveNodeSharedMemory(const std::filesystem::path& directory,
                                           std::string_view prefix) {
  const std::string start = std::string(prefix) + ".";
  std::error_code error;
  std::filesystem::directory_iterator entries(directory, error);
  if (error) {
    if (error == std::errc::no_such_file_or_directory) return std::size_t{0};
    return Status::IoError("cannot list " + directory.string() + ": " + error.message());
  }
  std::size_t removed = 0;
  Status first_failure;
  for (const auto& entry : entries) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(start)) continue;
    // Another user's entry under the step's name was planted, not made by
    // the step: /dev/shm is sticky, so it could not be removed anyway, and
    // failing on it would keep the step's teardown failing for good.
    struct stat info {};
    if (::lstat(entry.path().c_str(), &info) == 0 && info.st_uid != ::geteuid()) continue;
    // remove_all removes a symbolic link itself, never what it points to.
    std::error_code failure;
    const auto count = std::filesystem::remove_all(entry.path(), failure);
    if (failure && failure != std::errc::no_such_file_or_directory) {
      if (first_failure.ok()) {
        first_failure = Status::IoError("cannot remove " + entry.path().string() + ": " +
                                        failure.message() + ": remove it by hand");
      }
      continue;
    }
    if (count > 0) ++removed;
  }
  if (!first_failure.ok()) return first_failure;
  return removed;
}

}  // namespace sray::jobsetup
