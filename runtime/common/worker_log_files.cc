#include "common/worker_log_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string_view>
#include <system_error>

#include "common/whole_number.h"

namespace sray {
namespace {

constexpr std::string_view kPrefix = "worker-";
constexpr std::string_view kSuffix = ".log";

bool IsLogName(std::string_view name) {
  if (!name.starts_with(kPrefix)) return false;
  if (name.ends_with(".1")) name.remove_suffix(2);
  return name.ends_with(kSuffix) &&
         WholeNumber<std::uint32_t>(
             name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size()))
             .has_value();
}

}  // namespace

std::filesystem::path WorkerLogPath(const std::filesystem::path& directory, std::uint32_t rank) {
  return directory / (std::string(kPrefix) + std::to_string(rank) + std::string(kSuffix));
}

std::vector<WorkerLogFile> ListWorkerLogs(const std::filesystem::path& directory) {
  std::vector<WorkerLogFile> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(directory, error)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix)) continue;
    const auto rank = WholeNumber<std::uint32_t>(std::string_view(name).substr(
        kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size()));
    if (!rank) continue;
    std::error_code size_error;
    const auto size = entry.file_size(size_error);
    files.push_back({.rank = *rank, .size = size_error ? 0 : size});
  }
  std::sort(files.begin(), files.end(), [](const WorkerLogFile& left, const WorkerLogFile& right) {
    return left.rank < right.rank;
  });
  return files;
}

Result<WorkerLogChunk> ReadWorkerLog(const std::filesystem::path& directory, std::uint32_t rank,
                                     std::int64_t offset, std::uint64_t max_bytes) {
  const auto path = WorkerLogPath(directory, rank);
  const int file = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file < 0) {
    return Status::NotFound("worker " + std::to_string(rank) + " has no log on this node");
  }
  struct stat info {};
  ::fstat(file, &info);
  WorkerLogChunk chunk;
  chunk.size = static_cast<std::uint64_t>(info.st_size);
  const std::uint64_t start =
      offset < 0 ? (chunk.size > max_bytes ? chunk.size - max_bytes : 0)
                 : std::min<std::uint64_t>(static_cast<std::uint64_t>(offset), chunk.size);
  chunk.offset = start;
  chunk.data.resize(std::min<std::uint64_t>(max_bytes, chunk.size - start));
  const ssize_t got =
      ::pread(file, chunk.data.data(), chunk.data.size(), static_cast<off_t>(start));
  ::close(file);
  chunk.data.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
  return chunk;
}

Status CopyWorkerLogs(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::error_code error;
  std::filesystem::create_directories(to, error);
  if (error) return Status::FromErrno(error.value(), "creating " + to.string());
  ::chmod(to.c_str(), 0700);
  for (const auto& entry : std::filesystem::directory_iterator(from, error)) {
    const std::string name = entry.path().filename().string();
    if (!IsLogName(name)) continue;
    const auto target = to / name;
    std::filesystem::copy_file(entry.path(), target,
                               std::filesystem::copy_options::overwrite_existing, error);
    if (error) return Status::FromErrno(error.value(), "copying " + name + " to " + to.string());
    ::chmod(target.c_str(), 0600);
  }
  if (error) return Status::FromErrno(error.value(), "listing " + from.string());
  return Status::Ok();
}

}  // namespace sray
