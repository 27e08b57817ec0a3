#include "envs/stage.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <string_view>
#include <utility>
#include <vector>

#include "common/private_file.h"
#include "envs/create.h"
#include "envs/lock.h"
#include "envs/pack.h"
#include "envs/readers.h"
#include "envs/tree_size.h"
#include "envs/verify.h"

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
  // Waits for the lock; an interrupt (Ctrl-C of `sray env stage`, whose
  // handler breaks the wait with EINTR) ends the wait.
  static Result<CacheLock> Acquire(const fs::path& file, const Interrupted& interrupted) {
    const int descriptor = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (descriptor < 0)
      return Status::FromErrno(errno, "cannot open the environment cache lock " + file.string());
    while (::flock(descriptor, LOCK_EX) != 0) {
      if (errno != EINTR) {
        const int error = errno;
        ::close(descriptor);
        return Status::FromErrno(error, "cannot lock " + file.string());
      }
      if (interrupted && interrupted()) {
        ::close(descriptor);
        return Status::Unavailable("waiting for the environment cache lock " + file.string() +
                                   " was interrupted");
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
  std::sort(copies.begin(), copies.end(),
            [](const Copy& a, const Copy& b) { return a.used < b.used; });
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

// A copy's directory name: the first kKeyLength hex digits of its lock
// hash (a pack), or "spec-" and those of the spec file's (made by the
// conda tool).
bool IsCopyName(std::string_view name) {
  if (name.starts_with("spec-")) name.remove_prefix(5);
  return name.size() == kKeyLength &&
         name.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// Under the cache lock, so no stage is at work here: what stages killed
// by SIGKILL left, which a later stage of the same environment would
// remove, but which until then neither the limit counted nor anything
// offered. Staging directories nobody holds, and copies without their
// marker; only names this cache gives (a cache given as a directory that
// also holds the user's own files keeps them).
void RemoveWhatKilledStagesLeft(const fs::path& cache_root) {
  (void)RemoveStagingOfKilledUnpacks(cache_root);
  std::error_code error;
  for (fs::directory_iterator it(cache_root, error), end; !error && it != end;
       it.increment(error)) {
    if (!IsCopyName(it->path().filename().string())) continue;
    // Only a sure "a directory without a marker": any error (a stale NFS
    // handle, EACCES) keeps the copy, which jobs may be using.
    std::error_code kind;
    const bool directory = it->is_directory(kind) && !kind;
    const bool link = it->is_symlink(kind) || kind;
    const bool marked = fs::exists(it->path() / kMarker, kind) || kind;
    if (!directory || link || marked) continue;
    std::error_code ignored;
    fs::remove_all(it->path(), ignored);
  }
}

// Creates the cache directory (private to the user) and takes its lock.
// Its copies are run as the user's programs, so an existing directory is
// used only when nobody else could have put anything in it: a real
// directory of this user that no group or other user may write (it is then
// narrowed to 0700). The default lies in /tmp, where anyone may create
// /tmp/sray-envs-UID first.
Result<CacheLock> OpenCache(const fs::path& cache_argument, const Interrupted& interrupted) {
  std::error_code error;
  // "cache" and "cache/" name the directory itself, whose parent is made.
  fs::path cache_root = fs::absolute(cache_argument, error).lexically_normal();
  if (!cache_root.has_filename()) cache_root = cache_root.parent_path();
  SRAY_RETURN_IF_ERROR(AdoptPrivateDirectoryIn(cache_root, ::geteuid(), "environment cache"));
  auto lock = CacheLock::Acquire(cache_root / ".lock", interrupted);
  if (lock.ok()) RemoveWhatKilledStagesLeft(cache_root);
  return lock;
}

Status WriteMarker(const fs::path& marker, std::uint64_t bytes) {
  std::ofstream stream(marker);
  stream << bytes << "\n";
  if (!stream.flush()) return Status::IoError("cannot write " + marker.string());
  return Status::Ok();
}

// Staged copies, most recently used first.
std::vector<fs::path> StagedCopies(const fs::path& cache_root) {
  std::vector<std::pair<fs::file_time_type, fs::path>> copies;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(cache_root, error)) {
    const fs::path marker = entry.path() / kMarker;
    if (!entry.is_directory(error) || !fs::exists(marker, error)) continue;
    copies.emplace_back(fs::last_write_time(marker, error), entry.path());
  }
  std::sort(copies.begin(), copies.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<fs::path> paths;
  paths.reserve(copies.size());
  for (auto& copy : copies) paths.push_back(std::move(copy.second));
  return paths;
}

Result<std::string> LockHashOf(const fs::path& prefix) {
  auto installed = ReadPrefix(prefix);
  if (!installed.ok()) return installed.status();
  auto lock = MakeLock(*installed);
  if (!lock.ok()) return lock.status();
  return lock->hash;
}

}  // namespace

Result<StagedEnvironment> StagePack(const fs::path& pack, const fs::path& cache_root,
                                    std::uint64_t cache_limit_bytes, const UnpackObserver& observer,
                                    const Interrupted& interrupted) {
  auto header = InspectPack(pack);
  if (!header.ok()) return header.status();
  std::error_code error;
  auto lock = OpenCache(cache_root, interrupted);
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
  auto unpacked = Unpack(pack, staged.prefix, observer, interrupted);
  if (!unpacked.ok()) return unpacked.status().WithContext("cannot stage " + pack.string());
  SRAY_RETURN_IF_ERROR(WriteMarker(marker, unpacked->bytes));
  staged.evicted = Evict(cache_root, cache_limit_bytes, staged.prefix);
  return staged;
}

Result<StagedEnvironment> StageSpec(const fs::path& spec_file, const fs::path& cache_root,
                                    std::uint64_t cache_limit_bytes,
                                    const std::optional<fs::path>& conda_tool,
                                    const CreateObserver& observer, const Interrupted& interrupted,
                                    const std::vector<std::string>& tool_environment) {
  auto format = DetectSpecFormat(spec_file);
  if (!format.ok()) return format.status();
  if (*format == SpecFormat::kPrefix) {
    return Status::InvalidArgument(spec_file.string() +
                                   " is a prefix, not a spec: use it as it is");
  }
  auto spec = ReadSpec(spec_file);
  if (!spec.ok()) return spec.status();
  auto lock = OpenCache(cache_root, interrupted);
  if (!lock.ok()) return lock.status();

  std::error_code error;
  for (const fs::path& copy : StagedCopies(cache_root)) {
    auto installed = ReadPrefix(copy);
    if (!installed.ok()) continue;
    // A copy is what creating from the spec would make: pip packages the
    // spec cannot list (an explicit file) would not be there.
    const auto differences = Compare(*spec, *installed);
    if (!differences.empty() || !differences.not_compared.empty()) continue;
    auto hash = LockHashOf(copy);
    if (!hash.ok()) continue;
    fs::last_write_time(copy / kMarker, fs::file_time_type::clock::now(), error);
    return StagedEnvironment{.prefix = copy, .lock_hash = *hash, .reused = true, .evicted = 0};
  }
  if (!conda_tool) {
    return Status::NotFound(
        "no environment matching " + spec_file.string() + " is staged in " + cache_root.string() +
        " on this node, and no conda, mamba or micromamba is on the tasks' PATH: pass an "
        "environment packed with `sray env pack` (env=FILE), stage one on every node with "
        "`sray env stage`, or install micromamba on the nodes");
  }
  auto text = ReadWholeFile(spec_file);
  if (!text.ok()) return text.status();
  const std::string key = "spec-" + Sha256Hex(*text).substr(0, kKeyLength);
  StagedEnvironment staged{
      .prefix = cache_root / key, .lock_hash = {}, .reused = false, .evicted = 0};
  // A copy under this key that did not match above was cut short or changed.
  fs::remove_all(staged.prefix, error);
  const fs::path log = cache_root / (key + ".log");
  const Status created = CreateEnvironment(*conda_tool, spec_file, staged.prefix, log, observer,
                                           interrupted, tool_environment);
  if (!created.ok()) {
    fs::remove_all(staged.prefix, error);  // never a half-made environment
    return created;
  }
  auto hash = LockHashOf(staged.prefix);
  if (!hash.ok()) {
    fs::remove_all(staged.prefix, error);
    return hash.status();
  }
  staged.lock_hash = *hash;
  SRAY_RETURN_IF_ERROR(WriteMarker(staged.prefix / kMarker, MeasureTree(staged.prefix).bytes));
  staged.evicted = Evict(cache_root, cache_limit_bytes, staged.prefix);
  return staged;
}

}  // namespace sray::envs
