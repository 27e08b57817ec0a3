#pragma once

// Standard allocators whose single objects come from BlockPools, for
// node-based containers and allocate_shared whose elements a process may
// hold by the million for a moment (common/block_pool.h says why). Arrays
// (a hash table's buckets, a vector's storage) come from operator new.
// - PooledAllocator<T>: one pool per T, locked, made on first use and never
//   destroyed (objects freed while static objects are destroyed at exit
//   still find it), with a small cache of free blocks per thread. Any
//   thread.
// - SerialPoolAllocator<T>: the pools of a SerialBlockPools its user owns,
//   which take no lock: every allocation and free of the containers using
//   it happens under one lock of the user's (the Owner's tables, under its
//   mutex).
//
// Under AddressSanitizer every allocation goes to operator new instead:
// the sanitizer then still sees each object's bounds and lifetime, and its
// leak checker scans what the objects point to (it does not scan mappings
// of its own making, such as the pool's chunks).

#include <array>
#include <cstddef>
#include <memory>

#include "common/block_pool.h"

#if defined(__SANITIZE_ADDRESS__)
#define SRAY_BLOCK_POOLS_BYPASSED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SRAY_BLOCK_POOLS_BYPASSED 1
#endif
#endif
#ifndef SRAY_BLOCK_POOLS_BYPASSED
#define SRAY_BLOCK_POOLS_BYPASSED 0
#endif

namespace sray {

// Whether single T objects come from a pool (the rest from operator new).
template <typename T>
inline constexpr bool kPoolable =
    !SRAY_BLOCK_POOLS_BYPASSED && sizeof(T) <= BlockPool::kMaxBlockSize && alignof(T) <= 8;

template <typename T>
class PooledAllocator {
 public:
  using value_type = T;

  PooledAllocator() noexcept = default;
  // Rebinding: implicit, as the standard containers need.
  template <typename Other>
  PooledAllocator(const PooledAllocator<Other>&) noexcept {}  // NOLINT(google-explicit-constructor)

  [[nodiscard]] T* allocate(std::size_t count) {
    if (count != 1 || !kPoolable<T>) return std::allocator<T>().allocate(count);
    ThreadCache& cache = Cache();
    if (cache.disabled) return static_cast<T*>(Pool().Allocate());
    if (cache.count == 0) {
      Pool().AllocateSome(cache.blocks, kRefill);
      cache.count = kRefill;
    }
    return static_cast<T*>(cache.blocks[--cache.count]);
  }
  void deallocate(T* pointer, std::size_t count) noexcept {
    if (count != 1 || !kPoolable<T>) {
      std::allocator<T>().deallocate(pointer, count);
      return;
    }
    ThreadCache& cache = Cache();
    if (cache.disabled) {
      Pool().Free(pointer);
      return;
    }
    if (cache.count == kCacheCapacity) {
      Pool().FreeSome(cache.blocks + kRefill, kCacheCapacity - kRefill);
      cache.count = kRefill;
    }
    cache.blocks[cache.count++] = pointer;
  }

  template <typename Other>
  friend bool operator==(const PooledAllocator& /*left*/, const PooledAllocator<Other>& /*right*/) {
    return true;
  }

  // The pool behind every PooledAllocator<T> (for statistics and tests).
  static BlockPool& Pool() {
    static BlockPool* const pool = new BlockPool(sizeof(T));  // never destroyed (above)
    return *pool;
  }

 private:
  // Each thread keeps up to kCacheCapacity free blocks and goes to the pool
  // (and its lock) once per kRefill of them: objects made and dropped by one
  // thread (a Put, then its ObjectRef dropped) take no atomic instruction.
  // What a cache holds stays in use for the pool: at most 64 blocks a
  // thread, the last ones freed, so a drained burst leaves one chunk or two.
  static constexpr std::size_t kCacheCapacity = 64;
  static constexpr std::size_t kRefill = kCacheCapacity / 2;
  struct ThreadCache {  // trivially destructible: usable to the thread's end
    void* blocks[kCacheCapacity];
    std::size_t count;
    bool disabled;  // after the thread's flush: straight to the pool
  };
  // Gives a thread's cached blocks back when it ends, and disables its
  // cache for what that thread frees after (other thread-local and static
  // objects destroyed later).
  struct ThreadFlush {
    ThreadCache* cache;
    ~ThreadFlush() {
      Pool().FreeSome(cache->blocks, cache->count);
      cache->count = 0;
      cache->disabled = true;
    }
  };

  static ThreadCache& Cache() {
    thread_local ThreadCache cache{};
    thread_local ThreadFlush flush{&cache};
    (void)flush;
    return cache;
  }
};

// Pools of several block sizes (1 to BlockPool::kMaxBlockSize), made on
// first use; none takes a lock.
// Thread-safety: none; the owner serializes every call (above).
class SerialBlockPools {
 public:
  SerialBlockPools() = default;
  SerialBlockPools(const SerialBlockPools&) = delete;
  SerialBlockPools& operator=(const SerialBlockPools&) = delete;

  BlockPool& ForSize(std::size_t block_size) {
    auto& pool = by_size_[(block_size - 1) / 8];
    if (pool == nullptr)
      pool = std::make_unique<BlockPool>(block_size, BlockPool::Locking::kCallerSerializes);
    return *pool;
  }
  // Every pool's DetachEmptyChunks, in one set to unmap after the lock.
  [[nodiscard]] BlockPool::DetachedChunks DetachEmptyChunks() noexcept {
    BlockPool::DetachedChunks detached;
    for (const auto& pool : by_size_) {
      if (pool != nullptr) detached.Add(pool->DetachEmptyChunks());
    }
    return detached;
  }

 private:
  // By block size in units of 8 bytes (BlockPool rounds to those): found
  // with one index, as this is on the path of every object made.
  std::array<std::unique_ptr<BlockPool>, BlockPool::kMaxBlockSize / 8> by_size_;
};

template <typename T>
class SerialPoolAllocator {
 public:
  using value_type = T;

  explicit SerialPoolAllocator(SerialBlockPools* pools) noexcept : pools_(pools) {}
  // Rebinding: implicit, as the standard containers need.
  // NOLINTBEGIN(google-explicit-constructor)
  template <typename Other>
  SerialPoolAllocator(const SerialPoolAllocator<Other>& other) noexcept : pools_(other.pools()) {}
  // NOLINTEND(google-explicit-constructor)

  [[nodiscard]] T* allocate(std::size_t count) {
    if (count == 1 && kPoolable<T>) return static_cast<T*>(pools_->ForSize(sizeof(T)).Allocate());
    return std::allocator<T>().allocate(count);
  }
  void deallocate(T* pointer, std::size_t count) noexcept {
    if (count == 1 && kPoolable<T>) {
      pools_->ForSize(sizeof(T)).Free(pointer);  // made by allocate: no allocation here
      return;
    }
    std::allocator<T>().deallocate(pointer, count);
  }
  [[nodiscard]] SerialBlockPools* pools() const noexcept { return pools_; }

  template <typename Other>
  friend bool operator==(const SerialPoolAllocator& left, const SerialPoolAllocator<Other>& right) {
    return left.pools_ == right.pools();
  }

 private:
  SerialBlockPools* pools_;
};

}  // namespace sray
