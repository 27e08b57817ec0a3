#pragma once

// How much shared memory a node's object store may use, checked against the
// /dev/shm it lives in, so that a store that could never fit fails at start
// with the sizes and the fix rather than later with a full /dev/shm.
//
// Thread-safety: pure functions (StoreCapacityHere reads /dev/shm's size).

#include <cstdint>
#include <filesystem>
#include <optional>

#include "common/status.h"

namespace sray::object {

// The default share of /dev/shm, divided among the nodes on one machine.
inline constexpr double kDefaultStoreFraction = 0.3;
// Below this a store could not hold a handful of large objects.
inline constexpr std::uint64_t kMinimumStoreBytes = std::uint64_t{16} << 20;

// `configured`: object_store_memory, if given. `nodes_here`: the step's nodes
// on this machine, which share its /dev/shm.
Result<std::uint64_t> StoreCapacity(std::optional<std::uint64_t> configured,
                                    std::uint64_t shared_memory_bytes, std::uint32_t nodes_here);

// The same for the file system at `directory` (normally /dev/shm).
Result<std::uint64_t> StoreCapacityHere(const std::filesystem::path& directory,
                                        std::optional<std::uint64_t> configured,
                                        std::uint32_t nodes_here);

}  // namespace sray::object
