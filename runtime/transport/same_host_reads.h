#pragma once

// Pulls from a peer on the same host whose registered memory is a shared
// mapping of a file (memory_key.h): the file is mapped here, read-only, and
// copied from. One copy at memory speed, where UCX, for memory it did not
// allocate itself, emulates a get with active messages (two copies through
// its shared-memory queue: 0.15-0.23 of ucx_perftest's get at 1 MiB,
// docs/benchmarks.md).
//
// Mappings are kept for the next pull of the same file (a pull of 1 MiB
// costs less than mapping it): at most kKeptMappings of them and kKeptBytes
// in all, each until it has not been used for kKeepIdle or its file was
// deleted. A kept mapping holds its file's memory even after the owner
// deleted the file, so the bounds matter: housekeeping (DropIdle, at least
// every 200 ms on the progress thread) releases them.
//
// The first read of a file checks, with stat(), that the path still names the
// file the key describes (device and inode: the same path in another mount
// namespace, or a file replaced since, is not used) and that the range lies
// inside it; later reads through its kept mapping check the range and that
// the file is not deleted with an fstat of the descriptor the mapping keeps. The
// caller pulls through UCX whenever Read returns false. The owner must not
// shrink the file while a read may run: the object store deletes a pinned
// object's file instead of recycling it (ObjectStore::EraseLocked), and a
// deleted file keeps its bytes while mapped. Only regular files of this
// user are read, opened without following links or blocking.
//
// Thread-safety: every member may be called from any thread.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/memory_key.h"

namespace sray::transport {

class SameHostReads {
 public:
  static constexpr std::size_t kKeptMappings = 8;
  static constexpr std::size_t kKeptBytes = std::size_t{256} << 20;
  static constexpr std::chrono::seconds kKeepIdle{1};
  // DropIdle looks at its mappings at most this often (it runs on every
  // turn of the progress thread, and looking costs a system call each).
  static constexpr std::chrono::milliseconds kDropCheckInterval{100};

  // Copies `length` bytes at `remote_address` of the memory `key` describes
  // into `local`; false (nothing copied) when the key has no file of this
  // host, or the file is not as the key says.
  bool Read(const MemoryKey& key, std::uint64_t remote_address, void* local, std::size_t length);
  // Releases mappings unused for kKeepIdle, and those whose file was deleted.
  void DropIdle(std::chrono::steady_clock::time_point now);

  [[nodiscard]] std::uint64_t reads() const;
  [[nodiscard]] std::size_t kept_mappings() const;

 private:
  struct Mapping;
  std::shared_ptr<Mapping> MappingOf(const SharedFileOfMemory& file, std::uint64_t size);
  // The kept mapping of `file`'s device and inode, whatever its size, made
  // the most recent; null when none is kept.
  std::shared_ptr<Mapping> KeptMappingOf(const SharedFileOfMemory& file);
  // The kept mapping of `file` covering `size` bytes, made the most recent;
  // one too small goes to `unmapped_later`.
  std::shared_ptr<Mapping> FindKeptLocked(const SharedFileOfMemory& file, std::uint64_t size,
                                          std::vector<std::shared_ptr<Mapping>>& unmapped_later);

  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<Mapping>> mappings_;  // guarded by mutex_; most recent last
  std::atomic<std::uint64_t> reads_{0};
  std::chrono::steady_clock::time_point next_drop_check_;  // guarded by mutex_
  // mappings_.size(), readable without the lock: DropIdle with nothing kept
  // costs one atomic load.
  std::atomic<std::size_t> kept_{0};
};

}  // namespace sray::transport
