#pragma once

// msgpack serialization of task arguments, results and Put values. User
// types take part with MSGPACK_DEFINE(fields...), as in msgpack-c.

#include <cstddef>
#include <cstring>
#include <string>
#include <string_view>

#include <msgpack.hpp>

#include "sray/errors.h"

namespace sray::internal {

// Limits for unpacking `size` bytes: no array, map, string, binary or
// extension can hold more elements or bytes than the input has, and nesting
// stops at `depth`. msgpack's defaults (4 G each) let a 6-byte message make
// the parser reserve 64 GiB for an array it never fills (found by
// tests/fuzz/control_message_fuzzer).
inline msgpack::unpack_limit UnpackLimitFor(std::size_t size, std::size_t depth) {
  return {size, size, size, size, size, depth};
}

// Values nest no deeper than this (each level takes a byte at least).
inline constexpr std::size_t kDeepestValue = 512;

// msgpack encodes no string, binary or container of 2^32 bytes or
// elements or more: its own std::runtime_error reached the caller of Put,
// Remote or a task's return, with nothing to say what to do.
[[noreturn]] inline void ThrowTooLargeToEncode(const std::exception& error) {
  throw SerializationError(
      std::string("sray: cannot serialize a value: it holds a string, binary or container of "
                  "4 GiB or 2^32 elements or more, which msgpack cannot encode (") +
      error.what() + "): split it into smaller pieces, e.g. a vector of chunks");
}

template <typename T>
std::string Serialize(const T& value) {
  try {
    msgpack::sbuffer buffer;
    msgpack::pack(buffer, value);
    return {buffer.data(), buffer.size()};
  } catch (const msgpack::container_size_overflow& error) {
    ThrowTooLargeToEncode(error);
  }
}

// msgpack streams: one counts the bytes a value packs to, the other writes
// them to memory already sized for it (the object store), so a large value
// is copied once.
class CountingStream {
 public:
  void write(const char* /*data*/, std::size_t size) { size_ += size; }
  [[nodiscard]] std::size_t size() const { return size_; }

 private:
  std::size_t size_ = 0;
};

class MemoryStream {
 public:
  explicit MemoryStream(char* destination) : cursor_(destination) {}
  void write(const char* data, std::size_t size) {
    std::memcpy(cursor_, data, size);
    cursor_ += size;
  }

 private:
  char* cursor_;
};

// Put counts first: a value too large to encode is refused before any room
// is taken for it.
template <typename T>
std::size_t SerializedSize(const T& value) {
  try {
    CountingStream counter;
    msgpack::pack(counter, value);
    return counter.size();
  } catch (const msgpack::container_size_overflow& error) {
    ThrowTooLargeToEncode(error);
  }
}

// Throws sray::SerializationError naming the expected type when the bytes do
// not hold a T (for example a task registered with other parameter types).
template <typename T>
T Deserialize(std::string_view bytes, const char* what) {
  try {
    const msgpack::object_handle handle = msgpack::unpack(
        bytes.data(), bytes.size(), nullptr, nullptr, UnpackLimitFor(bytes.size(), kDeepestValue));
    return handle.get().as<T>();
  } catch (const std::exception& error) {
    throw SerializationError(std::string("sray: cannot read ") + what +
                             ": the bytes do not hold the expected type (" + error.what() +
                             "): check that both sides use the same types");
  }
}

}  // namespace sray::internal
