#pragma once

// Blocks of one size, carved from chunks mapped straight from the kernel,
// which go back to it once their blocks are freed.
//
// Why not malloc: a driver that holds a million small records for a moment
// (a burst of tasks: the owner's object entries, the ObjectRef handles)
// makes jemalloc create a metadata record for every slab of the peak and
// radix-tree leaves for every page it touched, and jemalloc keeps those for
// the life of the process: about 3 MiB after a million tasks, more than
// issue 14's bar of 1.1x the start allows (docs/reliability.md, Load).
// Memory mapped here leaves nothing behind once it is released, whatever
// the allocator.
//
// Chunks with room form a list, the one that last got room back first, so
// new blocks fill the holes that frees left in older chunks and a drain
// empties whole chunks. Emptied chunks are kept, pages and all, as many as
// it takes to get back to the most chunks in use of the last one or two
// seconds (and at least 4): records made and freed in order, or batches
// made and dropped round after round, reuse them instead of mapping fresh
// chunks, whose first writes cost a page fault each (11-15 us on the test
// VMs). The others are unmapped as they empty. As jemalloc's decay, this
// moves only while the pool is used: ReleaseEmptyChunks (for every locked
// pool: ReleaseAllEmptyChunks, which common/free_memory calls after a large
// drain, and each transport's progress thread once a burst of messages has
// ended: transport/burst_end_watch.h) unmaps all but one and hands that
// one's pages back.
//
// Thread-safety: a pool made with Locking::kInternal may be used from any
// thread (one mutex, held for a few instructions). One made with
// Locking::kCallerSerializes takes no lock of its own (each lock and unlock
// is an atomic instruction: a lock per pool cost async actor calls 25-40%
// of their rate): its user calls it under a lock of its own, and it is not
// in ReleaseAllEmptyChunks (its user calls DetachEmptyChunks under that
// lock).

#include <chrono>
#include <cstddef>
#include <mutex>

namespace sray {

class BlockPool {
  struct Chunk;  // defined in block_pool.cc

 public:
  static constexpr std::size_t kChunkBytes = 64 * 1024;
  static constexpr std::size_t kMaxBlockSize = 4096;
  enum class Locking { kInternal, kCallerSerializes };

  // `block_size`: at least 1 and at most kMaxBlockSize (std::bad_alloc
  // otherwise); rounded up to a multiple of 8. Blocks are aligned to 8.
  explicit BlockPool(std::size_t block_size, Locking locking = Locking::kInternal);
  // Unmaps every chunk; blocks still allocated become invalid.
  ~BlockPool();
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // Throws std::bad_alloc when the kernel refuses a new chunk.
  [[nodiscard]] void* Allocate();
  // `block` must come from this pool's Allocate; nullptr is ignored.
  void Free(void* block) noexcept;
  // Several at once, under one lock (for a thread's cache of blocks):
  // fills `blocks` with `count` blocks, or throws std::bad_alloc having
  // handed out none; frees `count` blocks.
  void AllocateSome(void** blocks, std::size_t count);
  void FreeSome(void* const* blocks, std::size_t count) noexcept;

  // Empty chunks taken out of their pool, unmapped when this is destroyed:
  // a pool whose caller serializes it under a lock of its own is detached
  // from under that lock and unmapped after it (thousands of munmap calls
  // after a large drain, each a few microseconds).
  class DetachedChunks {
   public:
    DetachedChunks() = default;
    DetachedChunks(DetachedChunks&& other) noexcept : first_(other.first_) {
      other.first_ = nullptr;
    }
    DetachedChunks& operator=(DetachedChunks&& other) noexcept;
    DetachedChunks(const DetachedChunks&) = delete;
    DetachedChunks& operator=(const DetachedChunks&) = delete;
    ~DetachedChunks();
    // Takes `other`'s chunks too.
    void Add(DetachedChunks&& other) noexcept;

   private:
    friend class BlockPool;
    Chunk* first_ = nullptr;  // linked by `next`
  };

  // Takes out every empty chunk but one, and returns that one's pages to
  // the kernel now (all but the page holding its header).
  [[nodiscard]] DetachedChunks DetachEmptyChunks() noexcept;
  // The same, the chunks unmapped at once (after the pool's own lock).
  void ReleaseEmptyChunks() noexcept;
  // ReleaseEmptyChunks of every Locking::kInternal pool that exists now.
  static void ReleaseAllEmptyChunks() noexcept;

  [[nodiscard]] std::size_t block_size() const { return block_size_; }
  [[nodiscard]] std::size_t blocks_per_chunk() const { return blocks_per_chunk_; }
  // Chunks mapped now, the empty ones kept included.
  [[nodiscard]] std::size_t chunks() const;
  [[nodiscard]] std::size_t empty_chunks() const;
  // Chunks mapped since the pool was made (each costs page faults).
  [[nodiscard]] std::size_t chunks_mapped() const;
  // Blocks allocated and not freed.
  [[nodiscard]] std::size_t blocks_in_use() const;

 private:
  [[nodiscard]] bool HasRoom(const Chunk* chunk) const;
  Chunk* MapChunk();
  void ForgetChunk(Chunk* chunk) noexcept;  // off the mapped list and count
  void UnmapChunk(Chunk* chunk) noexcept;
  void LinkFirst(Chunk* chunk);
  void Unlink(Chunk* chunk);
  void ChunkEmptied(Chunk* chunk) noexcept;
  void CountChunkInUse() noexcept;
  void* AllocateLocked();
  void FreeLocked(void* block) noexcept;

  // Takes mutex_ unless the caller serializes.
  class Guard {
   public:
    explicit Guard(const BlockPool& pool) : mutex_(pool.locked_ ? &pool.mutex_ : nullptr) {
      if (mutex_ != nullptr) mutex_->lock();
    }
    ~Guard() {
      if (mutex_ != nullptr) mutex_->unlock();
    }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    std::mutex* mutex_;
  };

  const std::size_t block_size_;
  const std::size_t blocks_per_chunk_;
  const bool locked_;
  mutable std::mutex mutex_;
  // Guarded by mutex_ (or the caller's lock):
  Chunk* with_room_ = nullptr;  // doubly linked; no empty chunk
  Chunk* empty_ = nullptr;      // the kept empty chunks, linked by `next`
  Chunk* mapped_ = nullptr;     // every chunk, doubly linked
  std::size_t chunks_ = 0;
  std::size_t chunks_mapped_ = 0;
  std::size_t empty_chunks_ = 0;
  std::size_t blocks_in_use_ = 0;
  // Chunks in use at most, this window and the one before.
  std::size_t peak_in_use_ = 0;
  std::size_t previous_peak_in_use_ = 0;
  std::chrono::steady_clock::time_point window_start_ = std::chrono::steady_clock::now();
  BlockPool* next_pool_ = nullptr;  // the registry's list, guarded by its mutex
  BlockPool* previous_pool_ = nullptr;
};

}  // namespace sray
