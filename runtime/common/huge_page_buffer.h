#pragma once

// Memory for one large buffer that is written once per use: a message
// received by rendezvous, a copy of an object. From 2 MiB up it is mapped on
// its own, aligned to the huge page size and advised for transparent huge
// pages (MADV_HUGEPAGE), so the kernel can back it with 2 MiB pages where the
// system allows them (the common `madvise` setting of
// /sys/kernel/mm/transparent_hugepage/enabled). The first write to a 4 KiB
// page costs a page fault, and a 256 MiB buffer has 65,536 of them: on this
// project's test machines (virtual machines with paravirtualised paging) the
// first write of 256 MiB took 0.69-0.76 s against 0.02-0.03 s with huge pages
// (docs/benchmarks.md, Transport). Smaller buffers come from the heap.
//
// The contents are not initialised. Ownership: the object owns its memory;
// moving transfers it. Thread-safety: none of its own, like any value.

#include <cstddef>

namespace sray {

class HugePageBuffer {
 public:
  // Buffers from this size (and at least one huge page) up are mapped on
  // their own.
  static constexpr std::size_t kMappedFrom = std::size_t{2} << 20;

  HugePageBuffer() = default;
  // Throws std::bad_alloc when the memory cannot be had, as operator new does.
  explicit HugePageBuffer(std::size_t bytes);
  ~HugePageBuffer();
  HugePageBuffer(HugePageBuffer&& other) noexcept;
  HugePageBuffer& operator=(HugePageBuffer&& other) noexcept;
  HugePageBuffer(const HugePageBuffer&) = delete;
  HugePageBuffer& operator=(const HugePageBuffer&) = delete;

  [[nodiscard]] std::byte* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  // Whether the memory is a mapping of its own.
  [[nodiscard]] bool mapped() const noexcept { return mapped_bytes_ != 0; }

 private:
  void Free() noexcept;

  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  // Length of the mapping at data_; 0 when data_ came from operator new[].
  std::size_t mapped_bytes_ = 0;
};

}  // namespace sray
