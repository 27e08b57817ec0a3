#pragma once

// One memory mapping of a file (an object in /dev/shm), unmapped on
// destruction. A mapping outlives the file's name: an object freed or spilled
// while a reader still maps it stays readable for that reader.
//
// Thread-safety: immutable after creation.

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string_view>

#include "common/status.h"

namespace sray::object {

class MappedFile {
 public:
  // Creates the file with `size` bytes, mapped read-write. The file may
  // exist already (a recycled object file of this store, renamed to this
  // name); it must then belong to this user.
  static Result<std::unique_ptr<MappedFile>> Create(const std::filesystem::path& path,
                                                    std::size_t size);
  // Maps an existing file read-only.
  static Result<std::unique_ptr<MappedFile>> OpenReadOnly(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // Writable mappings of large files are kept after use (with their file
  // open), up to a few, and handed out again when the store gives this
  // process the same file back (recycled under a new name): mapping and
  // unmapping 100 MiB costs more than writing it. Kept mappings whose file
  // was deleted are released at the next Create or destruction.
  static constexpr std::size_t kKeptMappings = 4;
  static constexpr std::size_t kKeepMinimum = std::size_t{1} << 20;
  // Bounds the memory of deleted files a kept mapping can hold unseen.
  static constexpr std::size_t kKeepMaximum = std::size_t{256} << 20;

  [[nodiscard]] std::byte* data() const { return data_; }
  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] std::string_view view() const {
    return {reinterpret_cast<const char*>(data_), size_};
  }

 private:
  MappedFile(std::byte* data, std::size_t size, int kept_fd = -1)
      : data_(data), size_(size), kept_fd_(kept_fd) {}
  std::byte* data_;
  std::size_t size_;
  int kept_fd_;  // writable mappings: the file, open, so the mapping can be kept
};

}  // namespace sray::object
