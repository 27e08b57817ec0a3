#include "common/huge_page_buffer.h"

#include <sys/mman.h>

#include <cstdint>
#include <fstream>
#include <new>
#include <utility>

namespace sray {
namespace {

// The size of a transparent huge page: 2 MiB on x86-64, larger on some ARM
// kernels. Without transparent huge pages, 2 MiB (the alignment is then
// harmless).
std::size_t HugePageBytes() {
  static const std::size_t bytes = [] {
    std::ifstream file("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size");
    std::size_t value = 0;
    if (file >> value && value != 0 && (value & (value - 1)) == 0) return value;
    return HugePageBuffer::kMappedFrom;
  }();
  return bytes;
}

std::size_t RoundUp(std::size_t value, std::size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

}  // namespace

HugePageBuffer::HugePageBuffer(std::size_t bytes) : size_(bytes) {
  const std::size_t huge_page = HugePageBytes();
  // Below one huge page (512 MiB on ARM kernels with 64 KiB pages), the
  // advice would make the kernel back the buffer with more than it asks.
  if (bytes < kMappedFrom || bytes < huge_page) {
    data_ = new std::byte[bytes];
    return;
  }
  const std::size_t length = RoundUp(bytes, huge_page);
  if (length < bytes || length + huge_page < length) throw std::bad_alloc();
  // Map one huge page more than needed, then unmap what lies outside the
  // aligned part: mmap itself only aligns to 4 KiB.
  // Not MAP_NORESERVE: a size the system cannot back fails here, as the
  // heap would, rather than killing the process at the first write.
  void* mapping =
      mmap(nullptr, length + huge_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<std::uintptr_t>(mapping);
  const std::uintptr_t aligned = RoundUp(start, huge_page);
  if (aligned > start) munmap(mapping, aligned - start);
  const std::size_t tail = start + huge_page - aligned;
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + length), tail);
  data_ = reinterpret_cast<std::byte*>(aligned);
  mapped_bytes_ = length;
  // Fails with EINVAL on kernels without transparent huge pages; the buffer
  // then simply has 4 KiB pages.
  (void)madvise(data_, mapped_bytes_, MADV_HUGEPAGE);
}

HugePageBuffer::~HugePageBuffer() {
  Free();
}

HugePageBuffer::HugePageBuffer(HugePageBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_bytes_(std::exchange(other.mapped_bytes_, 0)) {}

HugePageBuffer& HugePageBuffer::operator=(HugePageBuffer&& other) noexcept {
  if (this != &other) {
    Free();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
  }
  return *this;
}

void HugePageBuffer::Free() noexcept {
  if (data_ == nullptr) return;
  if (mapped_bytes_ != 0) {
    munmap(data_, mapped_bytes_);
  } else {
    delete[] data_;
  }
  data_ = nullptr;
  size_ = 0;
  mapped_bytes_ = 0;
}

}  // namespace sray
