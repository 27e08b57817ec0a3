#pragma once

// Hands memory the allocator keeps after frees back to the system. jemalloc
// (linked by default, cmake/SrayDependencies.cmake) returns freed pages only
// over its 10 s decay and only while the process allocates: an idle driver
// after a million tasks kept 300 MiB (docs/reliability.md, Load). With
// jemalloc loaded, purges all its arenas; otherwise malloc_trim (glibc).
// First the block pools' kept empty chunks (common/block_pool.h) and the
// calling thread's cache (below).
// Costs a few milliseconds after a large drain: call it rarely.
//
// Thread-safety: any thread.

namespace sray {

void ReturnFreedMemoryToTheSystem();

// Hands back what the calling thread's allocator cache holds: jemalloc keeps
// freed blocks per thread (up to hundreds of KiB after a burst) and trims a
// thread's cache only as that thread goes on allocating, so a thread that
// went idle after a burst keeps it for good. Cheap (no system call): call it
// when a thread goes idle after work, then ReturnFreedMemoryToTheSystem or
// jemalloc's decay takes the emptied pages.
//
// Thread-safety: any thread; acts on the caller's own cache only.
void ReturnThisThreadsCachedMemory();

// Hands back freed pages as jemalloc does itself while the process
// allocates: each call returns the share its decay curve says is due (all
// of it 10 s after the free). For a process gone idle, called now and then;
// cheap when there is nothing to hand back. Without jemalloc, malloc_trim.
//
// Thread-safety: any thread.
void DecayFreedMemory();

}  // namespace sray
