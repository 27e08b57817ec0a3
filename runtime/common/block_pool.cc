#include "common/block_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <new>
#include <utility>

namespace sray {

// At the start of its chunk; blocks follow it. A chunk is aligned to its
// size, so a block finds its chunk by masking its address.
struct alignas(64) BlockPool::Chunk {
  Chunk* previous = nullptr;  // in with_room_
  Chunk* next = nullptr;      // in with_room_ or empty_
  Chunk* previous_mapped = nullptr;
  Chunk* next_mapped = nullptr;
  void* free_list = nullptr;  // freed blocks, each holding the next
  char* unused = nullptr;     // the first block never handed out
  std::size_t in_use = 0;
  bool linked = false;  // in with_room_

  [[nodiscard]] char* first_block() { return reinterpret_cast<char*>(this) + sizeof(Chunk); }
};

namespace {

// Empty chunks a pool keeps whatever its use.
constexpr std::size_t kEmptyChunksKept = 4;
// How long the chunks in use at a peak stay mapped once emptied: 1 to 2 s.
constexpr std::chrono::seconds kPeakWindow{1};

std::size_t RoundedBlockSize(std::size_t requested) {
  if (requested == 0 || requested > BlockPool::kMaxBlockSize) throw std::bad_alloc();
  return (requested + 7) / 8 * 8;
}

// A chunk-sized mapping aligned to its size. First at `hint` (the address
// below the last chunk mapped: the kernel hands out addresses downwards, so
// it is usually free and the chunks form one mapping); otherwise twice the
// size, trimmed.
void* MapAligned(void* hint) {
  constexpr std::size_t size = BlockPool::kChunkBytes;
  constexpr int kProtection = PROT_READ | PROT_WRITE;
  constexpr int kFlags = MAP_PRIVATE | MAP_ANONYMOUS;
  void* mapping = ::mmap(hint, size, kProtection, kFlags, -1, 0);
  if (mapping == MAP_FAILED) throw std::bad_alloc();
  if (reinterpret_cast<std::uintptr_t>(mapping) % size == 0) return mapping;
  ::munmap(mapping, size);
  mapping = ::mmap(nullptr, 2 * size, kProtection, kFlags, -1, 0);
  if (mapping == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<std::uintptr_t>(mapping);
  const std::uintptr_t aligned = (start + size - 1) / size * size;
  if (aligned > start) ::munmap(mapping, aligned - start);
  const std::uintptr_t tail = start + 2 * size - (aligned + size);
  if (tail > 0) ::munmap(reinterpret_cast<void*>(aligned + size), tail);
  return reinterpret_cast<void*>(aligned);
}

// Every pool alive, for ReleaseAllEmptyChunks. Never destroyed: pools that
// live until exit (common/pooled_allocator.h) unregister from it then.
struct Registry {
  std::mutex mutex;
  BlockPool* first = nullptr;
};

Registry& Pools() {
  static auto* const registry = new Registry;
  return *registry;
}

}  // namespace

BlockPool::BlockPool(std::size_t block_size, Locking locking)
    : block_size_(RoundedBlockSize(block_size)),
      blocks_per_chunk_((kChunkBytes - sizeof(Chunk)) / block_size_),
      locked_(locking == Locking::kInternal) {
  static_assert(sizeof(Chunk) == 64, "a chunk's header takes one cache line");
  if (!locked_) return;
  Registry& registry = Pools();
  const std::lock_guard lock(registry.mutex);
  next_pool_ = registry.first;
  if (registry.first != nullptr) registry.first->previous_pool_ = this;
  registry.first = this;
}

BlockPool::~BlockPool() {
  if (locked_) {
    Registry& registry = Pools();
    const std::lock_guard lock(registry.mutex);
    if (previous_pool_ != nullptr) previous_pool_->next_pool_ = next_pool_;
    if (next_pool_ != nullptr) next_pool_->previous_pool_ = previous_pool_;
    if (registry.first == this) registry.first = next_pool_;
  }
  for (Chunk* chunk = mapped_; chunk != nullptr;) {
    Chunk* next = chunk->next_mapped;
    ::munmap(chunk, kChunkBytes);
    chunk = next;
  }
}

bool BlockPool::HasRoom(const Chunk* chunk) const {
  return chunk->free_list != nullptr || chunk->unused < reinterpret_cast<const char*>(chunk) +
                                                            sizeof(Chunk) +
                                                            blocks_per_chunk_ * block_size_;
}

BlockPool::Chunk* BlockPool::MapChunk() {
  char* const hint = mapped_ != nullptr && reinterpret_cast<std::uintptr_t>(mapped_) > kChunkBytes
                         ? reinterpret_cast<char*>(mapped_) - kChunkBytes
                         : nullptr;
  auto* chunk = new (MapAligned(hint)) Chunk;
  chunk->unused = chunk->first_block();
  chunk->next_mapped = mapped_;
  if (mapped_ != nullptr) mapped_->previous_mapped = chunk;
  mapped_ = chunk;
  ++chunks_;
  ++chunks_mapped_;
  return chunk;
}

void BlockPool::ForgetChunk(Chunk* chunk) noexcept {
  if (chunk->previous_mapped != nullptr) chunk->previous_mapped->next_mapped = chunk->next_mapped;
  if (chunk->next_mapped != nullptr) chunk->next_mapped->previous_mapped = chunk->previous_mapped;
  if (mapped_ == chunk) mapped_ = chunk->next_mapped;
  --chunks_;
}

void BlockPool::UnmapChunk(Chunk* chunk) noexcept {
  ForgetChunk(chunk);
  ::munmap(chunk, kChunkBytes);
}

void BlockPool::LinkFirst(Chunk* chunk) {
  chunk->previous = nullptr;
  chunk->next = with_room_;
  if (with_room_ != nullptr) with_room_->previous = chunk;
  with_room_ = chunk;
  chunk->linked = true;
}

void BlockPool::Unlink(Chunk* chunk) {
  if (chunk->previous != nullptr) chunk->previous->next = chunk->next;
  if (chunk->next != nullptr) chunk->next->previous = chunk->previous;
  if (with_room_ == chunk) with_room_ = chunk->next;
  chunk->previous = chunk->next = nullptr;
  chunk->linked = false;
}

void* BlockPool::Allocate() {
  const Guard guard(*this);
  return AllocateLocked();
}

void BlockPool::AllocateSome(void** blocks, std::size_t count) {
  const Guard guard(*this);
  std::size_t made = 0;
  try {
    for (; made < count; ++made) blocks[made] = AllocateLocked();
  } catch (const std::bad_alloc&) {
    for (std::size_t index = 0; index < made; ++index) FreeLocked(blocks[index]);
    throw;
  }
}

void* BlockPool::AllocateLocked() {
  Chunk* chunk = with_room_;
  if (chunk == nullptr) {
    if (empty_ != nullptr) {
      chunk = empty_;
      empty_ = chunk->next;
      --empty_chunks_;
    } else {
      chunk = MapChunk();
    }
    LinkFirst(chunk);
    CountChunkInUse();
  }
  void* block = nullptr;
  if (chunk->free_list != nullptr) {
    block = chunk->free_list;
    chunk->free_list = *static_cast<void**>(block);
  } else {
    block = chunk->unused;
    chunk->unused += block_size_;
  }
  ++chunk->in_use;
  ++blocks_in_use_;
  if (!HasRoom(chunk)) Unlink(chunk);
  return block;
}

void BlockPool::Free(void* block) noexcept {
  if (block == nullptr) return;
  const Guard guard(*this);
  FreeLocked(block);
}

void BlockPool::FreeSome(void* const* blocks, std::size_t count) noexcept {
  const Guard guard(*this);
  for (std::size_t index = 0; index < count; ++index) {
    if (blocks[index] != nullptr) FreeLocked(blocks[index]);
  }
}

void BlockPool::FreeLocked(void* block) noexcept {
  auto* chunk = reinterpret_cast<Chunk*>(reinterpret_cast<std::uintptr_t>(block) &
                                         ~std::uintptr_t{kChunkBytes - 1});
  *static_cast<void**>(block) = chunk->free_list;
  chunk->free_list = block;
  --chunk->in_use;
  --blocks_in_use_;
  if (!chunk->linked) LinkFirst(chunk);
  if (chunk->in_use == 0) ChunkEmptied(chunk);
}

void BlockPool::CountChunkInUse() noexcept {
  peak_in_use_ = std::max(peak_in_use_, chunks_ - empty_chunks_);
}

void BlockPool::ChunkEmptied(Chunk* chunk) noexcept {
  Unlink(chunk);
  // Kept with its pages, handed out from its start again.
  chunk->free_list = nullptr;
  chunk->unused = chunk->first_block();
  chunk->next = empty_;
  empty_ = chunk;
  ++empty_chunks_;
  // Enough stay to get back to the peak of use of the last one or two
  // seconds (and at least kEmptyChunksKept); the rest are unmapped. The
  // clock is read only past kEmptyChunksKept: a pool whose one chunk
  // empties and fills again at each object made and dropped reads none.
  if (empty_chunks_ <= kEmptyChunksKept) return;
  const std::size_t in_use = chunks_ - empty_chunks_;
  const auto now = std::chrono::steady_clock::now();
  if (now - window_start_ >= kPeakWindow) {
    previous_peak_in_use_ = now - window_start_ >= 2 * kPeakWindow ? in_use : peak_in_use_;
    peak_in_use_ = in_use;
    window_start_ = now;
  }
  const std::size_t peak = std::max(peak_in_use_, previous_peak_in_use_);
  const std::size_t kept = std::max(kEmptyChunksKept, peak > in_use ? peak - in_use : 0);
  while (empty_chunks_ > kept) {
    Chunk* surplus = empty_;
    empty_ = surplus->next;
    --empty_chunks_;
    UnmapChunk(surplus);
  }
}

BlockPool::DetachedChunks& BlockPool::DetachedChunks::operator=(DetachedChunks&& other) noexcept {
  if (this != &other) {
    DetachedChunks dropped(std::move(*this));
    first_ = other.first_;
    other.first_ = nullptr;
  }
  return *this;
}

BlockPool::DetachedChunks::~DetachedChunks() {
  for (Chunk* chunk = first_; chunk != nullptr;) {
    Chunk* next = chunk->next;
    ::munmap(chunk, kChunkBytes);
    chunk = next;
  }
}

void BlockPool::DetachedChunks::Add(DetachedChunks&& other) noexcept {
  while (other.first_ != nullptr) {
    Chunk* chunk = other.first_;
    other.first_ = chunk->next;
    chunk->next = first_;
    first_ = chunk;
  }
}

BlockPool::DetachedChunks BlockPool::DetachEmptyChunks() noexcept {
  const Guard guard(*this);
  DetachedChunks detached;
  while (empty_ != nullptr && empty_chunks_ > 1) {
    Chunk* chunk = empty_;
    empty_ = chunk->next;
    --empty_chunks_;
    ForgetChunk(chunk);
    chunk->next = detached.first_;
    detached.first_ = chunk;
  }
  if (empty_ != nullptr) {
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    if (page < kChunkBytes)
      ::madvise(reinterpret_cast<char*>(empty_) + page, kChunkBytes - page, MADV_DONTNEED);
  }
  return detached;
}

void BlockPool::ReleaseEmptyChunks() noexcept {
  const DetachedChunks detached = DetachEmptyChunks();
}

void BlockPool::ReleaseAllEmptyChunks() noexcept {
  Registry& registry = Pools();
  const std::lock_guard lock(registry.mutex);
  for (BlockPool* pool = registry.first; pool != nullptr; pool = pool->next_pool_)
    pool->ReleaseEmptyChunks();
}

std::size_t BlockPool::chunks() const {
  const Guard guard(*this);
  return chunks_;
}

std::size_t BlockPool::empty_chunks() const {
  const Guard guard(*this);
  return empty_chunks_;
}

std::size_t BlockPool::chunks_mapped() const {
  const Guard guard(*this);
  return chunks_mapped_;
}

std::size_t BlockPool::blocks_in_use() const {
  const Guard guard(*this);
  return blocks_in_use_;
}

}  // namespace sray
