#pragma once

// Little-endian integers in byte buffers, for the wire formats sray defines
// itself (remote memory keys, srun's rendezvous): appending, and a reader of
// untrusted input whose every read says whether the buffer still held enough.
//
// Thread-safety: a ByteReader is used by one thread at a time.

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include "transport/bytes.h"

namespace sray::transport {

template <typename Number>
void AppendLittleEndian(Bytes& out, Number value) {
  static_assert(std::is_unsigned_v<Number>, "unsigned integers only");
  for (std::size_t index = 0; index < sizeof(Number); ++index) {
    out.push_back(static_cast<std::byte>((value >> (8 * index)) & 0xFF));
  }
}

class ByteReader {
 public:
  explicit ByteReader(std::span<const std::byte> bytes) : bytes_(bytes) {}

  [[nodiscard]] std::size_t left() const { return bytes_.size() - offset_; }

  // A little-endian integer of sizeof(Number) bytes.
  template <typename Number>
  bool Read(Number& value) {
    static_assert(std::is_unsigned_v<Number>, "unsigned integers only");
    if (left() < sizeof(Number)) return false;
    value = 0;
    for (std::size_t index = 0; index < sizeof(Number); ++index) {
      value |= static_cast<Number>(static_cast<Number>(bytes_[offset_ + index]) << (8 * index));
    }
    offset_ += sizeof(Number);
    return true;
  }
  // The next `count` bytes, as a view into the buffer.
  bool Take(std::size_t count, std::span<const std::byte>& taken) {
    if (left() < count) return false;
    taken = bytes_.subspan(offset_, count);
    offset_ += count;
    return true;
  }

 private:
  std::span<const std::byte> bytes_;
  std::size_t offset_ = 0;
};

}  // namespace sray::transport
