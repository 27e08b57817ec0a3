#pragma once

// Hands memory the allocator keeps after frees back to the system. jemalloc
// (linked by default, cmake/SrayDependencies.cmake) returns freed pages only
// over its 10 s decay and only while the process allocates: an idle driver
// after a million tasks kept 300 MiB (docs/reliability.md, Load). With
// jemalloc loaded, purges all its arenas; otherwise malloc_trim (glibc).
// First the block pools' kept empty chunks (common/block_pool.h).
// Costs a few milliseconds after a large drain: call it rarely.
//
// Thread-safety: any thread.

namespace sray {

void ReturnFreedMemoryToTheSystem();

}  // namespace sray
