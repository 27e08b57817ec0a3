#include "transport/same_host_reads.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "common/copy_in_pieces.h"
#include "common/file_descriptor.h"

namespace sray::transport {

// One read-only mapping of a whole file, with the file kept open to see
// whether it was deleted; unmapped when the last user lets go.
struct SameHostReads::Mapping {
  // Takes over `open_file` (a descriptor).
  Mapping(int open_file, void* mapped, std::size_t mapped_size, std::uint64_t file_device,
          std::uint64_t file_inode)
      : file(open_file), data(mapped), size(mapped_size), device(file_device), inode(file_inode) {}
  ~Mapping() { ::munmap(data, size); }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  [[nodiscard]] bool Deleted() const {
    struct stat status {};
    return ::fstat(file.get(), &status) != 0 || status.st_nlink == 0;
  }

  // Whether [offset, offset + length) is mapped and still inside the file:
  // the owner may have shrunk it since (recycled for a smaller object), and a
  // read past a file's end is a SIGBUS.
  [[nodiscard]] bool StillCovers(std::uint64_t offset, std::size_t length) const {
    struct stat status {};
    if (offset > size || length > size - offset) return false;
    return ::fstat(file.get(), &status) == 0 && status.st_nlink > 0 &&
           offset + length <= static_cast<std::uint64_t>(status.st_size);
  }

  const FileDescriptor file;
  void* const data;
  const std::size_t size;
  const std::uint64_t device;
  const std::uint64_t inode;
  std::chrono::steady_clock::time_point last_used = std::chrono::steady_clock::now();
};

bool SameHostReads::Read(const MemoryKey& key, std::uint64_t remote_address, void* local,
                         std::size_t length) {
  if (!key.file || key.file->host.empty() || key.file->host != ThisHostId()) return false;
  const SharedFileOfMemory& file = *key.file;
  if (remote_address < key.address || length > key.length ||
      remote_address - key.address > key.length - length) {
    return false;
  }
  const std::uint64_t offset = file.offset + (remote_address - key.address);
  if (offset < file.offset) return false;
  // A file read before is checked through the descriptor its mapping keeps:
  // an fstat, where the path's stat walks /dev/shm (a tenth of a 1 MiB pull
  // here). The mapping is of the device and inode the key names, so what the
  // path's stat would add is only whether the file is still at that path.
  std::shared_ptr<Mapping> mapping = KeptMappingOf(file);
  if (!mapping || !mapping->StillCovers(offset, length)) {
    struct stat status {};
    if (::stat(file.path.c_str(), &status) != 0 || status.st_dev != file.device ||
        status.st_ino != file.inode || !S_ISREG(status.st_mode) ||
        offset > static_cast<std::uint64_t>(status.st_size) ||
        length > static_cast<std::uint64_t>(status.st_size) - offset) {
      return false;
    }
    mapping = MappingOf(file, static_cast<std::uint64_t>(status.st_size));
    if (!mapping || offset + length > mapping->size) return false;
  }
  CopyInPieces(local, static_cast<const std::byte*>(mapping->data) + offset, length);
  reads_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

std::shared_ptr<SameHostReads::Mapping> SameHostReads::KeptMappingOf(
    const SharedFileOfMemory& file) {
  if (kept_.load() == 0) return nullptr;
  std::vector<std::shared_ptr<Mapping>> none;  // no size asked for: none is too small
  std::lock_guard lock(mutex_);
  return FindKeptLocked(file, 0, none);
}

std::shared_ptr<SameHostReads::Mapping> SameHostReads::FindKeptLocked(
    const SharedFileOfMemory& file, std::uint64_t size,
    std::vector<std::shared_ptr<Mapping>>& unmapped_later) {
  for (auto kept = mappings_.begin(); kept != mappings_.end(); ++kept) {
    if ((*kept)->device != file.device || (*kept)->inode != file.inode) continue;
    auto found = std::move(*kept);
    mappings_.erase(kept);
    if (found->size < size) {
      // The file grew (recycled for a larger object): mapped again.
      unmapped_later.push_back(std::move(found));
      break;
    }
    found->last_used = std::chrono::steady_clock::now();
    mappings_.push_back(found);
    return found;
  }
  kept_.store(mappings_.size());
  return nullptr;
}

std::shared_ptr<SameHostReads::Mapping> SameHostReads::MappingOf(const SharedFileOfMemory& file,
                                                                 std::uint64_t size) {
  std::vector<std::shared_ptr<Mapping>> unmapped_later;  // outside the lock
  {
    std::lock_guard lock(mutex_);
    if (auto found = FindKeptLocked(file, size, unmapped_later)) return found;
  }
  // Not through a link, and without waiting: the path may have been replaced
  // since the caller's stat (by a FIFO, say).
  FileDescriptor descriptor(
      ::open(file.path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY));
  if (descriptor.get() < 0 || size == 0) return nullptr;
  struct stat status {};
  if (::fstat(descriptor.get(), &status) != 0 || !S_ISREG(status.st_mode) ||
      status.st_uid != ::geteuid() || status.st_dev != file.device || status.st_ino != file.inode ||
      static_cast<std::uint64_t>(status.st_size) < size) {
    return nullptr;
  }
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, descriptor.get(), 0);
  if (data == MAP_FAILED) return nullptr;
  auto mapping =
      std::make_shared<Mapping>(descriptor.Release(), data, size, file.device, file.inode);
  if (size > kKeptBytes) return mapping;  // used once, unmapped after the read
  std::lock_guard lock(mutex_);
  // Another thread may have mapped it meanwhile: one mapping per file.
  if (auto found = FindKeptLocked(file, size, unmapped_later)) {
    unmapped_later.push_back(std::move(mapping));
    return found;
  }
  mappings_.push_back(mapping);
  std::size_t kept_bytes = 0;
  for (const auto& kept : mappings_) kept_bytes += kept->size;
  while (mappings_.size() > kKeptMappings || kept_bytes > kKeptBytes) {
    kept_bytes -= mappings_.front()->size;
    unmapped_later.push_back(std::move(mappings_.front()));
    mappings_.erase(mappings_.begin());
  }
  kept_.store(mappings_.size());
  return mapping;
}

void SameHostReads::DropIdle(std::chrono::steady_clock::time_point now) {
  if (kept_.load() == 0) return;
  std::vector<std::shared_ptr<Mapping>> idle;  // unmapped outside the lock
  std::lock_guard lock(mutex_);
  if (now < next_drop_check_) return;
  next_drop_check_ = now + kDropCheckInterval;
  auto first_kept =
      std::stable_partition(mappings_.begin(), mappings_.end(), [&](const auto& mapping) {
        return now - mapping->last_used >= kKeepIdle || mapping->Deleted();
      });
  idle.assign(std::make_move_iterator(mappings_.begin()), std::make_move_iterator(first_kept));
  mappings_.erase(mappings_.begin(), first_kept);
  kept_.store(mappings_.size());
}

std::uint64_t SameHostReads::reads() const {
  return reads_.load(std::memory_order_relaxed);
}

std::size_t SameHostReads::kept_mappings() const {
  return kept_.load();
}

}  // namespace sray::transport
