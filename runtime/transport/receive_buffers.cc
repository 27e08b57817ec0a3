#include "transport/receive_buffers.h"

#include <algorithm>

namespace sray::transport {

ReceiveBuffer ReceiveBufferPool::Acquire(std::size_t length) {
  if (length >= kPooledBufferMinimum) {
    std::lock_guard lock(mutex_);
    for (auto it = pool_.begin(); it != pool_.end(); ++it) {
      if (it->capacity >= length) {
        ReceiveBuffer reused = std::move(*it);
        pool_.erase(it);
        pooled_bytes_ -= reused.capacity;
        return reused;
      }
    }
  }
  const std::size_t capacity = std::max<std::size_t>(length, 1);
  return {std::make_unique_for_overwrite<std::byte[]>(capacity), capacity};
}

void ReceiveBufferPool::Release(ReceiveBuffer buffer) {
  if (buffer.capacity < kPooledBufferMinimum) return;
  std::lock_guard lock(mutex_);
  pooled_bytes_ += buffer.capacity;
  pool_.push_back(std::move(buffer));
  while (pooled_bytes_ > kPooledBytesKept && !pool_.empty()) {
    pooled_bytes_ -= pool_.front().capacity;
    pool_.erase(pool_.begin());
  }
}

std::size_t ReceiveBufferPool::pooled_bytes() const {
  std::lock_guard lock(mutex_);
  return pooled_bytes_;
}

}  // namespace sray::transport
