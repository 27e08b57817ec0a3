#pragma once

// Identifies an object in the job: the transport rank of the process that
// owns it (created the reference) and a number unique within that owner.

#include <cstdint>
#include <functional>
#include <string>

#include <msgpack.hpp>

namespace sray::internal {

struct ObjectId {
  std::uint64_t owner = 0;
  std::uint64_t index = 0;

  friend bool operator==(const ObjectId&, const ObjectId&) = default;
  friend auto operator<=>(const ObjectId&, const ObjectId&) = default;  // NOLINT(modernize-use-nullptr): clang-tidy 14 misreads <=>
  [[nodiscard]] std::string ToString() const {
    return std::to_string(owner) + "." + std::to_string(index);
  }
  MSGPACK_DEFINE(owner, index)
};

struct ObjectIdHash {
  std::size_t operator()(const ObjectId& id) const noexcept {
    return std::hash<std::uint64_t>()(id.owner * 0x9E3779B97F4A7C15ULL ^ id.index);
  }
};

}  // namespace sray::internal
