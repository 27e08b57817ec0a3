#include "transport/same_host_reads.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>

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
  struct stat status {};
  if (::stat(file.path.c_str(), &status) != 0 || status.st_dev != file.device ||
      status.st_ino != file.inode || !S_ISREG(status.st_mode) || offset < file.offset ||
      offset > static_cast<std::uint64_t>(status.st_size) ||
      length > static_cast<std::uint64_t>(status.st_size) - offset) {
    return false;
  }
  const std::shared_ptr<Mapping> mapping =
      MappingOf(file, static_cast<std::uint64_t>(status.st_size));
  if (!mapping || offset + length > mapping->size) return false;
  if (length > 0) std::memcpy(local, static_cast<const std::byte*>(mapping->data) + offset, length);
  std::lock_guard lock(mutex_);
  reads_++;
  return true;
}

std::shared_ptr<SameHostReads::Mapping> SameHostReads::MappingOf(const SharedFileOfMemory& file,
                                                                 std::uint64_t size) {
  {
    std::lock_guard lock(mutex_);
    for (auto kept = mappings_.begin(); kept != mappings_.end(); ++kept) {
      if ((*kept)->device != file.device || (*kept)->inode != file.inode) continue;
      if ((*kept)->size >= size) {
        auto found = *kept;
        found->last_used = std::chrono::steady_clock::now();
        mappings_.erase(kept);
        mappings_.push_back(found);
        return found;
      }
      mappings_.erase(kept);  // the file grew (recycled for a larger object): map it again
      break;
    }
  }
  FileDescriptor descriptor(::open(file.path.c_str(), O_RDONLY | O_CLOEXEC));
  if (descriptor.get() < 0 || size == 0) return nullptr;
  struct stat status {};
  // The path may have been replaced between the caller's stat and the open.
  if (::fstat(descriptor.get(), &status) != 0 || status.st_dev != file.device ||
      status.st_ino != file.inode || static_cast<std::uint64_t>(status.st_size) < size) {
    return nullptr;
  }
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, descriptor.get(), 0);
  if (data == MAP_FAILED) return nullptr;
  auto mapping =
      std::make_shared<Mapping>(descriptor.Release(), data, size, file.device, file.inode);
  if (size > kKeptBytes) return mapping;          // used once, unmapped after the read
  std::vector<std::shared_ptr<Mapping>> evicted;  // unmapped outside the lock
  std::lock_guard lock(mutex_);
  mappings_.push_back(mapping);
  std::size_t kept_bytes = 0;
  for (const auto& kept : mappings_) kept_bytes += kept->size;
  while (mappings_.size() > kKeptMappings || kept_bytes > kKeptBytes) {
    kept_bytes -= mappings_.front()->size;
    evicted.push_back(std::move(mappings_.front()));
    mappings_.erase(mappings_.begin());
  }
  return mapping;
}

void SameHostReads::DropIdle(std::chrono::steady_clock::time_point now) {
  std::vector<std::shared_ptr<Mapping>> idle;  // unmapped outside the lock
  std::lock_guard lock(mutex_);
  auto first_kept =
      std::stable_partition(mappings_.begin(), mappings_.end(), [&](const auto& mapping) {
        return now - mapping->last_used >= kKeepIdle || mapping->Deleted();
      });
  idle.assign(std::make_move_iterator(mappings_.begin()), std::make_move_iterator(first_kept));
  mappings_.erase(mappings_.begin(), first_kept);
}

void SameHostReads::Clear() {
  std::vector<std::shared_ptr<Mapping>> all;
  std::lock_guard lock(mutex_);
  all.swap(mappings_);
}

std::uint64_t SameHostReads::reads() const {
  std::lock_guard lock(mutex_);
  return reads_;
}

std::size_t SameHostReads::kept_mappings() const {
  std::lock_guard lock(mutex_);
  return mappings_.size();
}

}  // namespace sray::transport
