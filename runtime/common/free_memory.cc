#include "common/free_memory.h"

#include <dlfcn.h>
#include <malloc.h>

#include <cstddef>
#include <string>

#include "common/block_pool.h"

namespace sray {
namespace {

using Mallctl = int (*)(const char*, void*, std::size_t*, void*, std::size_t);

// jemalloc's, when it is the process's allocator; looked up at run time so
// that builds without it (sanitizers) need no header or library.
Mallctl FindMallctl() {
  return reinterpret_cast<Mallctl>(::dlsym(RTLD_DEFAULT, "mallctl"));
}

Mallctl JemallocControl() {
  static const Mallctl mallctl = FindMallctl();
  return mallctl;
}

}  // namespace

void ReturnThisThreadsCachedMemory() {
  const Mallctl mallctl = JemallocControl();
  if (mallctl != nullptr) (void)mallctl("thread.tcache.flush", nullptr, nullptr, nullptr, 0);
}

void DecayFreedMemory() {
  const Mallctl mallctl = JemallocControl();
  if (mallctl != nullptr) {
    // MALLCTL_ARENAS_ALL (4096): every arena.
    (void)mallctl("arena.4096.decay", nullptr, nullptr, nullptr, 0);
    return;
  }
  (void)::malloc_trim(0);
}

void ReturnFreedMemoryToTheSystem() {
  BlockPool::ReleaseAllEmptyChunks();
  ReturnThisThreadsCachedMemory();
  const Mallctl mallctl = JemallocControl();
  if (mallctl != nullptr) {
    // MALLCTL_ARENAS_ALL (4096): every arena.
    (void)mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0);
    return;
  }
  (void)::malloc_trim(0);
}

}  // namespace sray
