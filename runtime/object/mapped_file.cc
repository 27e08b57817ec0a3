#include "object/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>
#include <cstdint>

#include "common/file_descriptor.h"

namespace sray::object {
namespace {

// An empty object still needs a valid pointer: map one page.
std::size_t MappedLength(std::size_t size) {
  return size == 0 ? 1 : size;
}

// Writable mappings kept for reuse, by the inode of their file.
struct KeptMapping {
  dev_t device;
  ino_t inode;
  std::byte* data;
  std::size_t size;
  int fd;
};

class KeptMappings {
 public:
  static KeptMappings& Instance() {
    static auto* instance = new KeptMappings();  // outlives static destructors
    return *instance;
  }

  // The kept mapping of this file, if it has exactly this size.
  std::optional<KeptMapping> Take(dev_t device, ino_t inode, std::size_t size) {
    std::lock_guard lock(mutex_);
    ReleaseDeletedLocked();
    for (auto entry = kept_.begin(); entry != kept_.end(); ++entry) {
      if (entry->device != device || entry->inode != inode) continue;
      KeptMapping found = *entry;
      kept_.erase(entry);
      if (found.size == size) return found;
      Release(found);
      return std::nullopt;
    }
    return std::nullopt;
  }

  void Keep(KeptMapping mapping) {
    std::lock_guard lock(mutex_);
    ReleaseDeletedLocked();
    kept_.push_back(mapping);
    std::size_t bytes = 0;
    for (const auto& entry : kept_) bytes += entry.size;
    while (kept_.size() > MappedFile::kKeptMappings ||
           (bytes > MappedFile::kKeepMaximum && kept_.size() > 1)) {
      bytes -= kept_.front().size;
      Release(kept_.front());
      kept_.erase(kept_.begin());
    }
  }

 private:
  static void Release(const KeptMapping& mapping) {
    ::munmap(mapping.data, mapping.size);
    ::close(mapping.fd);
  }
  // A mapping of a deleted file would keep its memory alive unseen.
  void ReleaseDeletedLocked() {
    for (auto entry = kept_.begin(); entry != kept_.end();) {
      struct stat status {};
      if (::fstat(entry->fd, &status) != 0 || status.st_nlink == 0) {
        Release(*entry);
        entry = kept_.erase(entry);
      } else {
        ++entry;
      }
    }
  }

  std::mutex mutex_;
  std::vector<KeptMapping> kept_;
};

}  // namespace

Result<std::unique_ptr<MappedFile>> MappedFile::Create(const std::filesystem::path& path,
                                                       std::size_t size) {
  FileDescriptor file(::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (file.get() < 0) return Status::FromErrno(errno, "cannot create " + path.string());
  struct stat status {};
  if (::fstat(file.get(), &status) != 0 || status.st_uid != ::geteuid() || !S_ISREG(status.st_mode)) {
    return Status::PermissionDenied(path.string() +
                                    " exists and is not this user's object file: remove it");
  }
  if (static_cast<std::uint64_t>(status.st_size) != size &&
      ::ftruncate(file.get(), static_cast<off_t>(size)) != 0) {
    return Status::FromErrno(errno, "cannot size " + path.string());
  }
  if (auto kept = KeptMappings::Instance().Take(status.st_dev, status.st_ino, size)) {
    // Already mapped here: the file came back to this process recycled.
    return std::unique_ptr<MappedFile>(new MappedFile(kept->data, kept->size, kept->fd));
  }
  // posix_fallocate reserves the tmpfs pages now, so a full /dev/shm is an
  // error here rather than a SIGBUS when the object is written. A recycled
  // file has its pages already.
  const bool allocated = static_cast<std::uint64_t>(status.st_blocks) * 512 >= size;
  if (size > 0 && !allocated) {
    const int error = ::posix_fallocate(file.get(), 0, static_cast<off_t>(size));
    if (error != 0) {
      ::unlink(path.c_str());
      if (error == ENOSPC) {
        return Status::ResourceExhausted(
            "cannot reserve " + std::to_string(size) + " bytes for " + path.string() + ": " +
            path.parent_path().string() +
            " is full: free space there (other jobs' files) or lower object_store_memory");
      }
      return Status::FromErrno(error, "cannot reserve " + std::to_string(size) + " bytes for " +
                                          path.string());
    }
  }
  // Populated: the writer touches every page anyway, and one call maps them
  // faster than a fault per page.
  void* data = ::mmap(nullptr, MappedLength(size), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_POPULATE, file.get(), 0);
  if (data == MAP_FAILED) {
    const int error = errno;
    ::unlink(path.c_str());
    return Status::FromErrno(error, "cannot map " + path.string());
  }
  const int kept_fd = size >= kKeepMinimum && size <= kKeepMaximum ? file.Release() : -1;
  return std::unique_ptr<MappedFile>(new MappedFile(static_cast<std::byte*>(data), size, kept_fd));
}

Result<std::unique_ptr<MappedFile>> MappedFile::OpenReadOnly(const std::filesystem::path& path) {
  FileDescriptor file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (file.get() < 0) return Status::FromErrno(errno, "cannot open " + path.string());
  struct stat status {};
  if (::fstat(file.get(), &status) != 0) {
    return Status::FromErrno(errno, "cannot stat " + path.string());
  }
  const auto size = static_cast<std::size_t>(status.st_size);
  void* data = ::mmap(nullptr, MappedLength(size), PROT_READ, MAP_SHARED, file.get(), 0);
  if (data == MAP_FAILED) return Status::FromErrno(errno, "cannot map " + path.string());
  return std::unique_ptr<MappedFile>(new MappedFile(static_cast<std::byte*>(data), size));
}

MappedFile::~MappedFile() {
  if (kept_fd_ >= 0) {
    struct stat status {};
    if (::fstat(kept_fd_, &status) == 0 && status.st_nlink > 0) {
      KeptMappings::Instance().Keep(
          {.device = status.st_dev, .inode = status.st_ino, .data = data_, .size = size_, .fd = kept_fd_});
      return;
    }
    ::close(kept_fd_);
  }
  ::munmap(data_, MappedLength(size_));
}

}  // namespace sray::object
