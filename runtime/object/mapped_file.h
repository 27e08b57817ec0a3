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

  [[nodiscard]] std::byte* data() const { return data_; }
  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] std::string_view view() const {
    return {reinterpret_cast<const char*>(data_), size_};
  }

 private:
  MappedFile(std::byte* data, std::size_t size) : data_(data), size_(size) {}
  std::byte* data_;
  std::size_t size_;
};

}  // namespace sray::object
