#pragma once

// How a placement group's bundles are laid out on nodes (Ray's strategies).
// One type from the public API down to the head's directory and the wire.

#include <cstdint>

#include <msgpack.hpp>

namespace sray {

enum class PlacementStrategy : std::uint8_t {
  kPack = 0,          // as few nodes as possible
  kSpread = 1,        // as many nodes as possible
  kStrictPack = 2,    // one node, or wait
  kStrictSpread = 3,  // one node per bundle, or wait
};

}  // namespace sray

MSGPACK_ADD_ENUM(sray::PlacementStrategy);
