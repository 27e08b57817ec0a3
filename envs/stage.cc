#include "envs/stage.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <utility>
#include <vector>

#include "envs/pack.h"

namespace sray::envs {
namespace {

namespace fs = std::filesystem;

// Marks a completely staged copy; holds its size; its mtime is the last use.
constexpr const char* kMarker = ".sray-staged";
// Directory names: the first 16 hex digits of the lock hash keep the path
// short, since binaries can only be relocated to prefixes no longer than the
// one they were packed from.
constexpr std::size_t kKeyLength = 16;

class CacheLock {
 public:
  static Result<CacheLock> Acquire(const fs::path& file) {
    const int descriptor = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (descriptor < 0) return Status::FromErrno(errno, "cannot open the environment cache lock " + file.string());
    while (::flock(descriptor, LOCK_EX) != 0) {
      if (errno != EINTR) {
        const int error = errno;
        ::close(descriptor);
        return Status::FromErrno(error, "cannot lock " + file.string());
      }
    }
    return CacheLock(descriptor);
  }
  CacheLock(CacheLock&& other) noexcept : descriptor_(std::exchange(other.descriptor_, -1)) {}
  CacheLock& operator=(CacheLock&&) = delete;
  CacheLock(const CacheLock&) = delete;
  CacheLock& operator=(const CacheLock&) = delete;
  ~CacheLock() {
    if (descriptor_ >= 0) ::close(descriptor_);  // releases the flock
  }

 private:
  explicit CacheLock(int descriptor) : descriptor_(descriptor) {}
  int descriptor_;
};

std::uint64_t RecordedSize(const fs::path& marker) {
  std::ifstream stream(marker);
  std::uint64_t size = 0;
  stream >> size;
  return size;
}

std::uint64_t Evict(const fs::path& cache_root, std::uint64_t limit, const fs::path& keep) {
  struct Copy {
    fs::path directory;
    fs::file_time_type used;
    std::uint64_t size;
  };
  std::vector<Copy> copies;
  std::uint64_t total = 0;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(cache_root, error)) {
    const fs::path marker = entry.path() / kMarker;
    if (!entry.is_directory(error) || !fs::exists(marker, error)) continue;
    const std::uint64_t size = RecordedSize(marker);
    total += size;
    copies.push_back({entry.path(), fs::last_write_time(marker, error), size});
  }
  std::sort(copies.begin(), copies.end(), [](const Copy& a, const Copy& b) { return a.used < b.used; });
  std::uint64_t evicted = 0;
  for (const auto& copy : copies) {
    if (total <= limit) break;
    if (copy.directory == keep) continue;
    fs::remove(copy.directory / kMarker, error);  // no longer offered before it goes
    fs::remove_all(copy.directory, error);
    total -= copy.size;
    ++evicted;
  }
  return evicted;
}

}  // namespace

Result<StagedEnvironment> StagePack(const fs::path& pack, const fs::path& cache_root,
                                    std::uint64_t cache_limit_bytes) {
  auto header = InspectPack(pack);
  if (!header.ok()) return header.status();
  std::error_code error;
  fs::create_directories(cache_root, error);
  if (error) return Status::IoError("cannot create the environment cache " + cache_root.string() + ": " + error.message());
  ::chmod(cache_root.c_str(), 0700);
  auto lock = CacheLock::Acquire(cache_root / ".lock");
  if (!lock.ok()) return lock.status();

  StagedEnvironment staged;
  staged.lock_hash = header->lock_hash;
  staged.prefix = cache_root / header->lock_hash.substr(0, kKeyLength);
  const fs::path marker = staged.prefix / kMarker;
  if (fs::exists(marker, error)) {
    fs::last_write_time(marker, fs::file_time_type::clock::now(), error);
    staged.reused = true;
    return staged;
  }
  // A copy without its marker was cut short (a crash mid-rename is not
  // possible, but an eviction in progress is): start over.
  fs::remove_all(staged.prefix, error);
  auto unpacked = Unpack(pack, staged.prefix);
  if (!unpacked.ok()) return unpacked.status().WithContext("cannot stage " + pack.string());
  {
    std::ofstream stream(marker);
    stream << unpacked->bytes << "\n";
    if (!stream.flush()) return Status::IoError("cannot write " + marker.string());
  }
  staged.evicted = Evict(cache_root, cache_limit_bytes, staged.prefix);
  return staged;
}

}  // namespace sray::envs
