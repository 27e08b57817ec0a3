#pragma once

// The byte buffers messages carry, and the two conversions to and from text
// that error responses, locations and tests need.

#include <cstddef>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

namespace sray::transport {

using Bytes = std::vector<std::byte>;

inline Bytes BytesOf(std::string_view text) {
  Bytes bytes(text.size());
  if (!text.empty()) std::memcpy(bytes.data(), text.data(), text.size());
  return bytes;
}

// A view of `bytes` as text; valid as long as `bytes` is.
inline std::string_view TextOf(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

}  // namespace sray::transport
