#include "transport/receive_buffers.h"

#include <algorithm>
#include <bit>
#include <vector>

namespace sray::transport {
namespace {

constexpr std::chrono::milliseconds kIdleCheckInterval{250};

std::size_t SizeClassOf(std::size_t capacity) {
  return static_cast<std::size_t>(std::countr_zero(capacity));
}

}  // namespace

std::size_t ReceiveBufferPool::CapacityFor(std::size_t length) {
  // Beyond what the pool keeps, the length itself: such a buffer is never
  // kept, and rounding 300 MiB up to 512 would only risk the allocation.
  if (length > kPooledBytesKept) return length;
  return std::max(kSmallestReceiveBuffer, std::bit_ceil(length));
}

ReceiveBuffer ReceiveBufferPool::Acquire(std::size_t length) {
  const std::size_t capacity = CapacityFor(length);
  if (std::has_single_bit(capacity)) {
    std::lock_guard lock(mutex_);
    auto& kept = kept_[SizeClassOf(capacity)];
    if (!kept.empty()) {
      ReceiveBuffer reused = std::move(kept.back().buffer);
      kept.pop_back();
      kept_count_.fetch_sub(1, std::memory_order_relaxed);
      pooled_bytes_ -= reused.capacity();
      return reused;
    }
  }
  return {HugePageBuffer(capacity)};
}

void ReceiveBufferPool::Release(ReceiveBuffer buffer) {
  const std::size_t capacity = buffer.capacity();
  if (buffer.data() == nullptr || !std::has_single_bit(capacity) ||
      capacity < kSmallestReceiveBuffer || capacity > kPooledBytesKept) {
    return;  // not one of this pool's, or too large to keep
  }
  std::vector<ReceiveBuffer> given_back;  // freed outside the lock
  std::lock_guard lock(mutex_);
  // Read under the lock, so each class stays in order of release (DropIdle).
  const auto now = std::chrono::steady_clock::now();
  pooled_bytes_ += capacity;
  kept_[SizeClassOf(capacity)].push_back({std::move(buffer), releases_++, now});
  kept_count_.fetch_add(1, std::memory_order_relaxed);
  while (pooled_bytes_ > kPooledBytesKept) given_back.push_back(TakeOldest());
}

ReceiveBuffer ReceiveBufferPool::TakeOldest() {
  std::deque<Kept>* oldest = nullptr;
  for (auto& kept : kept_) {
    if (!kept.empty() && (oldest == nullptr || kept.front().released < oldest->front().released)) {
      oldest = &kept;
    }
  }
  if (oldest == nullptr) return {};
  ReceiveBuffer taken = std::move(oldest->front().buffer);
  oldest->pop_front();
  pooled_bytes_ -= taken.capacity();
  kept_count_.fetch_sub(1, std::memory_order_relaxed);
  return taken;
}

void ReceiveBufferPool::DropIdle(std::chrono::steady_clock::time_point now) {
  if (kept_count_.load(std::memory_order_relaxed) == 0) return;
  std::vector<ReceiveBuffer> idle;  // freed outside the lock
  {
    std::lock_guard lock(mutex_);
    if (now < next_idle_check_) return;
    next_idle_check_ = now + kIdleCheckInterval;
    const auto cutoff = now - kKeepIdleReceiveBuffer;
    for (auto& kept : kept_) {
      // Each class is in order of release: the idle ones are in front.
      while (!kept.empty() && kept.front().released_at <= cutoff) {
        pooled_bytes_ -= kept.front().buffer.capacity();
        idle.push_back(std::move(kept.front().buffer));
        kept.pop_front();
        kept_count_.fetch_sub(1, std::memory_order_relaxed);
      }
    }
  }
}

std::size_t ReceiveBufferPool::pooled_bytes() const {
  std::lock_guard lock(mutex_);
  return pooled_bytes_;
}

}  // namespace sray::transport
