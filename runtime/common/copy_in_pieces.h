#pragma once

// Copies of large blocks (pulls from a same-host object file, results written
// into the object store) made in pieces that fit a core's L2 cache.
//
// Why pieces: glibc's memcpy picks its strategy by length. On this project's
// AMD machines it uses `rep movsb` below the L2 size (1 MiB) and a vector loop
// from there up, and the vector loop copied a mapped /dev/shm file 14-35%
// slower at every size from 1 to 64 MiB (docs/benchmarks.md, Transport: "The
// 1 MiB same-host pull"). Handing glibc pieces of kCopyPieceBytes keeps its
// in-cache choice, whatever that is on the processor at hand, instead of
// hard-coding an instruction here.
//
// Thread-safety: a plain function; the caller owns both ranges.

#include <cstddef>

namespace sray {

inline constexpr std::size_t kCopyPieceBytes = std::size_t{256} << 10;

// As memcpy: the ranges must not overlap.
void CopyInPieces(void* to, const void* from, std::size_t length);

}  // namespace sray
