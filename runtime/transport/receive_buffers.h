#pragma once

// Buffers for messages that arrive by UCX's rendezvous protocol (large
// ones). Buffers of kPooledBufferMinimum bytes and up are recycled: a fresh
// large allocation costs a page fault on every page it is written to, which
// halved large-message bandwidth. Up to kPooledBytesKept bytes are kept,
// the oldest given back first.
//
// Thread-safety: Acquire and Release may be called from any thread.

#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace sray::transport {

inline constexpr std::size_t kPooledBufferMinimum = std::size_t{64} * 1024;
// Enough for a window of large messages in flight.
inline constexpr std::size_t kPooledBytesKept = std::size_t{256} << 20;

// Memory that is not zero-filled on allocation.
struct ReceiveBuffer {
  std::unique_ptr<std::byte[]> data;
  std::size_t capacity = 0;
};

class ReceiveBufferPool {
 public:
  // A buffer of at least `length` bytes (at least one).
  ReceiveBuffer Acquire(std::size_t length);
  void Release(ReceiveBuffer buffer);
  [[nodiscard]] std::size_t pooled_bytes() const;

 private:
  mutable std::mutex mutex_;
  std::vector<ReceiveBuffer> pool_;  // guarded by mutex_; oldest first
  std::size_t pooled_bytes_ = 0;     // guarded by mutex_
};

}  // namespace sray::transport
