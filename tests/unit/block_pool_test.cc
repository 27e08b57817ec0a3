#include "common/block_pool.h"

#include <sys/mman.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <new>
#include <set>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/pooled_allocator.h"

namespace sray {
namespace {

// Whether the page holding `address` is mapped in this process.
bool IsMapped(const void* address) {
  const auto page = reinterpret_cast<std::uintptr_t>(address) / 4096 * 4096;
  return ::msync(reinterpret_cast<void*>(page), 4096, MS_ASYNC) == 0 || errno != ENOMEM;
}

std::size_t BlocksPerChunk(std::size_t block_size) {
  return BlockPool(block_size).blocks_per_chunk();
}

TEST(BlockPool, BlocksAreDistinctAlignedAndKeepWhatIsWrittenInThem) {
  BlockPool pool(40);
  const std::size_t count = 3 * BlocksPerChunk(40) + 17;
  std::vector<char*> blocks;
  for (std::size_t index = 0; index < count; ++index) {
    auto* block = static_cast<char*>(pool.Allocate());
    ASSERT_EQ(reinterpret_cast<std::uintptr_t>(block) % 8, 0U);
    std::memset(block, static_cast<int>(index % 251), 40);
    blocks.push_back(block);
  }
  std::vector<char*> sorted = blocks;
  std::sort(sorted.begin(), sorted.end());
  for (std::size_t index = 1; index < sorted.size(); ++index) {
    ASSERT_GE(sorted[index] - sorted[index - 1], 40) << "blocks overlap";
  }
  for (std::size_t index = 0; index < count; ++index) {
    for (std::size_t byte = 0; byte < 40; ++byte) {
      ASSERT_EQ(static_cast<unsigned char>(blocks[index][byte]), index % 251);
    }
  }
  EXPECT_EQ(pool.blocks_in_use(), count);
  EXPECT_EQ(pool.chunks(), 4U);
  for (char* block : blocks) pool.Free(block);
  EXPECT_EQ(pool.blocks_in_use(), 0U);
}

TEST(BlockPool, FreedBlocksAreHandedOutAgainBeforeANewChunkIsMapped) {
  BlockPool pool(160);
  std::vector<void*> blocks;
  for (std::size_t index = 0; index < BlocksPerChunk(160); ++index)
    blocks.push_back(pool.Allocate());
  ASSERT_EQ(pool.chunks(), 1U);
  void* freed = blocks[10];
  pool.Free(freed);
  EXPECT_EQ(pool.Allocate(), freed);
  EXPECT_EQ(pool.chunks(), 1U);
  for (void* block : blocks) pool.Free(block);
}

// The point of the pool: a drained burst keeps its chunks only for a
// next one soon after, and gives them back when asked.
TEST(BlockPool, ADrainedBurstKeepsItsChunksUntilReleased) {
  BlockPool pool(32);
  std::vector<void*> blocks;
  for (std::size_t index = 0; index < 10 * BlocksPerChunk(32); ++index)
    blocks.push_back(pool.Allocate());
  ASSERT_EQ(pool.chunks(), 10U);
  for (void* block : blocks) ASSERT_TRUE(IsMapped(block));
  for (void* block : blocks) pool.Free(block);
  EXPECT_EQ(pool.chunks(), 10U) << "kept for a burst as large within a second or two";
  EXPECT_EQ(pool.empty_chunks(), 10U);
  const auto mapped_chunks = [&] {
    std::size_t mapped = 0;
    for (std::size_t index = 0; index < blocks.size(); index += BlocksPerChunk(32)) {
      mapped += IsMapped(blocks[index]) ? 1U : 0U;
    }
    return mapped;
  };
  pool.ReleaseEmptyChunks();
  EXPECT_EQ(pool.chunks(), 1U);
  EXPECT_EQ(mapped_chunks(), 1U);
}

// Once the peak is two seconds old, chunks emptied beyond the four kept
// are unmapped as they empty.
TEST(BlockPool, ChunksBeyondTheRecentPeakAreUnmappedAsTheyEmpty) {
  BlockPool pool(32);
  std::vector<void*> blocks;
  for (std::size_t index = 0; index < 10 * BlocksPerChunk(32); ++index)
    blocks.push_back(pool.Allocate());
  for (void* block : blocks) pool.Free(block);
  ASSERT_EQ(pool.chunks(), 10U);
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  blocks.clear();
  for (std::size_t index = 0; index < BlocksPerChunk(32) + 1; ++index)
    blocks.push_back(pool.Allocate());
  for (void* block : blocks) pool.Free(block);
  EXPECT_EQ(pool.chunks(), 4U);
  EXPECT_EQ(pool.chunks_mapped(), 10U) << "the second use took kept chunks";
}

TEST(BlockPool, AChunkKeptByOneLiveBlockStaysAndTheRestGo) {
  BlockPool pool(64);
  std::vector<void*> blocks;
  for (std::size_t index = 0; index < 8 * BlocksPerChunk(64); ++index)
    blocks.push_back(pool.Allocate());
  void* survivor = blocks[BlocksPerChunk(64) + 3];  // in the second chunk
  for (void* block : blocks) {
    if (block != survivor) pool.Free(block);
  }
  pool.ReleaseEmptyChunks();
  EXPECT_EQ(pool.chunks(), 2U) << "the survivor's chunk and one kept empty";
  EXPECT_TRUE(IsMapped(survivor));
  EXPECT_EQ(pool.blocks_in_use(), 1U);
  pool.Free(survivor);
  EXPECT_EQ(pool.chunks(), 2U) << "both kept, empty";
}

// A count that goes up and down across a chunk's edge (a program holding a
// chunk's worth of references, then making and dropping one at a time)
// reuses the kept chunk instead of mapping a new one for every block.
TEST(BlockPool, ACountAtAChunksEdgeReusesTheKeptChunk) {
  BlockPool pool(32);
  std::vector<void*> blocks;
  for (std::size_t index = 0; index < BlocksPerChunk(32); ++index)
    blocks.push_back(pool.Allocate());
  void* first_extra = pool.Allocate();
  ASSERT_EQ(pool.chunks(), 2U);
  pool.Free(first_extra);
  for (int round = 0; round < 1000; ++round) {
    void* extra = pool.Allocate();
    EXPECT_EQ(extra, first_extra);
    pool.Free(extra);
  }
  EXPECT_EQ(pool.chunks(), 2U);
  for (void* block : blocks) pool.Free(block);
}

// Records made and freed in order (tasks submitted while earlier ones
// finish) cycle through emptied chunks: no new chunk, with its page
// faults, for every chunk's worth of records.
TEST(BlockPool, AStreamMadeAndFreedInOrderReusesEmptiedChunks) {
  BlockPool pool(160);
  const std::size_t window = 3 * pool.blocks_per_chunk();
  std::deque<void*> in_flight;
  for (std::size_t index = 0; index < 40 * pool.blocks_per_chunk(); ++index) {
    in_flight.push_back(pool.Allocate());
    if (in_flight.size() > window) {
      pool.Free(in_flight.front());
      in_flight.pop_front();
    }
  }
  EXPECT_LE(pool.chunks_mapped(), 8U) << "a window of 3 chunks' worth needs few chunks";
  for (void* block : in_flight) pool.Free(block);
  EXPECT_LE(pool.chunks(), 4U);
}

// What a drain leaves is handed back on request: all kept empty chunks but
// one unmapped, and that one's pages (but its header's) no longer resident.
TEST(BlockPool, ReleasingEmptyChunksUnmapsThemAndHandsBackTheKeptOnesPages) {
  BlockPool pool(64);
  BlockPool other(32);
  std::vector<void*> blocks;
  for (std::size_t index = 0; index < 4 * pool.blocks_per_chunk(); ++index)
    blocks.push_back(pool.Allocate());
  void* other_block = other.Allocate();
  other.Free(other_block);  // its one chunk now kept empty
  // The first two chunks emptied: kept, as two chunks are still in use.
  for (std::size_t index = 0; index < 2 * pool.blocks_per_chunk(); ++index)
    pool.Free(blocks[index]);
  ASSERT_EQ(pool.empty_chunks(), 2U);
  ASSERT_EQ(pool.chunks(), 4U);

  BlockPool::ReleaseAllEmptyChunks();
  EXPECT_EQ(pool.chunks(), 3U);
  EXPECT_EQ(pool.empty_chunks(), 1U);
  EXPECT_EQ(other.chunks(), 1U);
  void* kept = nullptr;
  for (void* block : {blocks[0], blocks[pool.blocks_per_chunk()]}) {
    if (IsMapped(block)) {
      EXPECT_EQ(kept, nullptr) << "only one empty chunk stays mapped";
      kept = block;
    }
  }
  ASSERT_NE(kept, nullptr);
  auto* chunk = reinterpret_cast<unsigned char*>(reinterpret_cast<std::uintptr_t>(kept) &
                                                 ~std::uintptr_t{BlockPool::kChunkBytes - 1});
  std::vector<unsigned char> resident(BlockPool::kChunkBytes / 4096);
  ASSERT_EQ(::mincore(chunk, BlockPool::kChunkBytes, resident.data()), 0);
  std::size_t resident_pages = 0;
  for (std::size_t page = 1; page < resident.size(); ++page) resident_pages += resident[page] & 1U;
  EXPECT_EQ(resident_pages, 0U);

  // Still usable, from its start.
  void* again = pool.Allocate();
  std::memset(again, 7, 64);
  pool.Free(again);
  for (std::size_t index = 2 * pool.blocks_per_chunk(); index < blocks.size(); ++index)
    pool.Free(blocks[index]);
  pool.ReleaseEmptyChunks();
  EXPECT_EQ(pool.chunks(), 1U);
}

// The owner takes its pools' empty chunks out under its lock and unmaps
// them after: taken out, they are no longer the pool's, and stay mapped
// until the set is dropped.
TEST(BlockPool, DetachedChunksAreUnmappedWhenDropped) {
  BlockPool pool(160, BlockPool::Locking::kCallerSerializes);
  std::vector<void*> blocks;
  for (std::size_t index = 0; index < 6 * pool.blocks_per_chunk(); ++index)
    blocks.push_back(pool.Allocate());
  for (void* block : blocks) pool.Free(block);
  ASSERT_EQ(pool.empty_chunks(), 6U);
  std::size_t mapped_before = 0;
  std::size_t mapped_after = 0;
  {
    BlockPool::DetachedChunks detached = pool.DetachEmptyChunks();
    EXPECT_EQ(pool.chunks(), 1U);
    for (std::size_t index = 0; index < blocks.size(); index += pool.blocks_per_chunk()) {
      mapped_before += IsMapped(blocks[index]) ? 1U : 0U;
    }
    BlockPool::DetachedChunks moved;
    moved.Add(std::move(detached));
  }
  for (std::size_t index = 0; index < blocks.size(); index += pool.blocks_per_chunk()) {
    mapped_after += IsMapped(blocks[index]) ? 1U : 0U;
  }
  EXPECT_EQ(mapped_before, 6U);
  EXPECT_EQ(mapped_after, 1U);
  void* again = pool.Allocate();  // from the one kept
  pool.Free(again);
  EXPECT_EQ(pool.chunks(), 1U);
}

TEST(BlockPool, ThreadsAllocatingAndFreingAtOnceGetDistinctBlocks) {
  BlockPool pool(48);
  constexpr std::size_t kThreads = 4;
  constexpr int kRounds = 20;
  constexpr int kBlocksARound = 5000;
  std::vector<std::thread> threads;
  std::vector<int> failures(kThreads, 0);
  for (std::size_t thread = 0; thread < kThreads; ++thread) {
    threads.emplace_back([&pool, &failures, thread] {
      std::vector<std::uint64_t*> mine;
      for (int round = 0; round < kRounds; ++round) {
        for (int index = 0; index < kBlocksARound; ++index) {
          auto* block = static_cast<std::uint64_t*>(pool.Allocate());
          block[0] = thread;
          block[5] = static_cast<std::uint64_t>(index);
          mine.push_back(block);
        }
        for (std::size_t index = 0; index < mine.size(); ++index) {
          if (mine[index][0] != thread || mine[index][5] != index) ++failures[thread];
          pool.Free(mine[index]);
        }
        mine.clear();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (std::size_t thread = 0; thread < kThreads; ++thread)
    EXPECT_EQ(failures[thread], 0) << "thread " << thread;
  EXPECT_EQ(pool.blocks_in_use(), 0U);
  EXPECT_EQ(pool.chunks(), pool.empty_chunks());
  pool.ReleaseEmptyChunks();
  EXPECT_EQ(pool.chunks(), 1U);
}

TEST(BlockPool, BlockSizesItCannotServeAreRefused) {
  EXPECT_THROW(BlockPool(0), std::bad_alloc);
  EXPECT_THROW(BlockPool(BlockPool::kMaxBlockSize + 1), std::bad_alloc);
  BlockPool largest(BlockPool::kMaxBlockSize);
  void* block = largest.Allocate();
  std::memset(block, 1, BlockPool::kMaxBlockSize);
  largest.Free(block);
  largest.Free(nullptr);  // ignored
}

struct Record {
  std::uint64_t first = 0;
  std::uint64_t second = 0;
};

TEST(PooledAllocator, ServesHashTablesAndSharedObjects) {
  std::unordered_map<int, Record, std::hash<int>, std::equal_to<int>,
                     PooledAllocator<std::pair<const int, Record>>>
      table;
  for (int key = 0; key < 100'000; ++key) table[key] = Record{static_cast<std::uint64_t>(key), 7};
  for (int key = 0; key < 100'000; key += 2) table.erase(key);
  ASSERT_EQ(table.size(), 50'000U);
  for (const auto& [key, record] : table) {
    ASSERT_EQ(record.first, static_cast<std::uint64_t>(key));
    ASSERT_EQ(record.second, 7U);
  }
  table.clear();
  table.rehash(0);

  std::vector<std::shared_ptr<Record>> shared;
  for (std::uint64_t index = 0; index < 10'000; ++index) {
    shared.push_back(std::allocate_shared<Record>(PooledAllocator<Record>(), Record{index, index}));
  }
  std::vector<std::weak_ptr<Record>> watched(shared.begin(), shared.end());
  for (std::uint64_t index = 0; index < shared.size(); ++index)
    ASSERT_EQ(shared[index]->second, index);
  shared.clear();
  for (const auto& weak : watched) EXPECT_TRUE(weak.expired());
}

// A type of its own, so that its pool is fresh.
struct MadeOnOneThread {
  std::uint64_t value = 0;
};

// Blocks a thread made and cached go back to the pool when it ends, and a
// block made on one thread and freed on another is not lost.
TEST(PooledAllocator, AThreadsCachedBlocksGoBackWhenItEnds) {
  using Allocator = PooledAllocator<MadeOnOneThread>;
  BlockPool& pool = Allocator::Pool();
  std::vector<MadeOnOneThread*> handed_over;
  std::thread maker([&handed_over] {
    std::vector<MadeOnOneThread*> freed_here;
    for (std::uint64_t index = 0; index < 100; ++index) {
      MadeOnOneThread* made = Allocator().allocate(1);
      made->value = index;
      (index % 2 == 0 ? handed_over : freed_here).push_back(made);
    }
    for (MadeOnOneThread* made : freed_here) Allocator().deallocate(made, 1);
  });  // its 50 freed went to its cache, given back as it ends
  maker.join();
  // Under AddressSanitizer the allocator bypasses its pools.
  const std::size_t handed_over_in_pool = kPoolable<MadeOnOneThread> ? 50 : 0;
  EXPECT_EQ(pool.blocks_in_use(), handed_over_in_pool)
      << "only the 50 handed over are still in use";
  for (std::uint64_t index = 0; index < handed_over.size(); ++index) {
    ASSERT_EQ(handed_over[index]->value, 2 * index);
  }
  std::thread freer([&handed_over] {
    for (MadeOnOneThread* made : handed_over) Allocator().deallocate(made, 1);
  });
  freer.join();
  EXPECT_EQ(pool.blocks_in_use(), 0U) << "freed on another thread, given back at its end";
}

}  // namespace
}  // namespace sray
