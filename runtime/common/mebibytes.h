#pragma once

// Sizes in messages to users, in MiB: one spelling for every message that
// names a store, a share of /dev/shm or an object.
//
// Thread-safety: none needed; no shared state.

#include <cstdint>
#include <string>

namespace sray {

// "144 MiB": whole mebibytes, rounded down.
std::string WholeMebibytes(std::uint64_t bytes);

// "143.9 MiB": one decimal.
std::string Mebibytes(std::uint64_t bytes);

}  // namespace sray
