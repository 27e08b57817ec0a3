#pragma once

// Buffers for messages that arrive by UCX's rendezvous protocol: every
// message above UCX's rendezvous threshold (above 8 KiB on shared memory
// here). All are recycled, up to a limit (below). A fresh buffer costs a
// page fault on every page
// the message is written to, and freeing one of 16-32 KiB let glibc hand the
// top of its heap back (madvise) to fault it in again for the next: streams
// of 16 KiB and 32 KiB messages ran at 0.2 GB/s on shared memory, against
// 3-5 GB/s with every size pooled (docs/benchmarks.md).
//
// Capacities are powers of two from kSmallestReceiveBuffer (a message above
// kPooledBytesKept gets a buffer of its own length, not kept), so a buffer
// serves any message of its size class and none of a smaller class (a 64 MiB
// buffer is not held up by a 16 KiB message). Only pages a message touched
// are resident, so rounding up costs address space, not memory. Up to
// kPooledBytesKept bytes of capacity are kept, the oldest buffer given back
// first; a released buffer is reused newest first (its pages are warm). One
// not reused within kKeepIdleReceiveBuffer is given back by DropIdle (the
// transport's housekeeping), so a burst of large messages does not hold its
// memory for the life of the process.
//
// Thread-safety: Acquire and Release may be called from any thread.

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>

#include "common/huge_page_buffer.h"

namespace sray::transport {

inline constexpr std::size_t kSmallestReceiveBuffer = std::size_t{4} * 1024;
// Enough for a window of large messages in flight.
inline constexpr std::size_t kPooledBytesKept = std::size_t{256} << 20;
inline constexpr std::chrono::seconds kKeepIdleReceiveBuffer{2};

// Memory that is not zero-filled on allocation; from 2 MiB up, advised for
// huge pages (common/huge_page_buffer.h): a fresh 256 MiB buffer faulted in
// 4 KiB at a time cost 0.7 s on the test machines.
struct ReceiveBuffer {
  HugePageBuffer memory;

  [[nodiscard]] std::byte* data() const noexcept { return memory.data(); }
  [[nodiscard]] std::size_t capacity() const noexcept { return memory.size(); }
};

class ReceiveBufferPool {
 public:
  // A buffer of at least `length` bytes: its size class's power of two (or
  // `length` itself above kPooledBytesKept).
  ReceiveBuffer Acquire(std::size_t length);
  void Release(ReceiveBuffer buffer);
  // Gives back the buffers released before now - kKeepIdleReceiveBuffer.
  // Cheap when nothing is kept; looks at most every 250 ms otherwise.
  void DropIdle(std::chrono::steady_clock::time_point now);
  [[nodiscard]] std::size_t pooled_bytes() const;

  // The capacity a buffer for `length` bytes gets.
  [[nodiscard]] static std::size_t CapacityFor(std::size_t length);

 private:
  struct Kept {
    ReceiveBuffer buffer;
    std::uint64_t released = 0;  // order of release, for giving back the oldest
    std::chrono::steady_clock::time_point released_at;
  };
  static constexpr std::size_t kClasses = 64;

  // Removes the buffer released first; the caller frees it after unlocking.
  ReceiveBuffer TakeOldest();  // needs mutex_ held

  mutable std::mutex mutex_;
  // By size class (log2 of the capacity); each oldest first. Guarded by mutex_.
  std::array<std::deque<Kept>, kClasses> kept_;
  std::size_t pooled_bytes_ = 0;     // guarded by mutex_
  std::uint64_t releases_ = 0;       // guarded by mutex_
  std::chrono::steady_clock::time_point next_idle_check_;  // guarded by mutex_
  // How many buffers are kept, readable without the lock.
  std::atomic<std::size_t> kept_count_{0};
};

}  // namespace sray::transport
