#pragma once

// msgpack serialization of task arguments, results and Put values. User
// types take part with MSGPACK_DEFINE(fields...), as in msgpack-c.

#include <cstddef>
#include <string>
#include <string_view>

#include <msgpack.hpp>

#include "sray/errors.h"

namespace sray::internal {

template <typename T>
std::string Serialize(const T& value) {
  msgpack::sbuffer buffer;
  msgpack::pack(buffer, value);
  return std::string(buffer.data(), buffer.size());
}

// Throws sray::SerializationError naming the expected type when the bytes do
// not hold a T (for example a task registered with other parameter types).
template <typename T>
T Deserialize(std::string_view bytes, const char* what) {
  try {
    const msgpack::object_handle handle = msgpack::unpack(bytes.data(), bytes.size());
    return handle.get().as<T>();
  } catch (const std::exception& error) {
    throw SerializationError(std::string("sray: cannot read ") + what +
                             ": the bytes do not hold the expected type (" + error.what() +
                             "): check that both sides use the same types");
  }
}

}  // namespace sray::internal
