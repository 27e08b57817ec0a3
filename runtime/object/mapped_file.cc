#include "object/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace sray::object {
namespace {

// An empty object still needs a valid pointer: map one page.
std::size_t MappedLength(std::size_t size) {
  return size == 0 ? 1 : size;
}

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  [[nodiscard]] int get() const { return fd_; }

 private:
  int fd_;
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
  // posix_fallocate reserves the tmpfs pages now, so a full /dev/shm is an
  // error here rather than a SIGBUS when the object is written.
  if (size > 0) {
    const int error = ::posix_fallocate(file.get(), 0, static_cast<off_t>(size));
    if (error != 0) {
      ::unlink(path.c_str());
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
  return std::unique_ptr<MappedFile>(new MappedFile(static_cast<std::byte*>(data), size));
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
  ::munmap(data_, MappedLength(size_));
}

}  // namespace sray::object
