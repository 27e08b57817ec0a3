#include "common/recent_ids.h"

namespace sray {

void RecentIds::Add(std::uint64_t id) {
  std::lock_guard lock(mutex_);
  const std::uint64_t stamp = next_stamp_++;
  if (!ids_.emplace(id, stamp).second) return;
  order_.emplace_back(id, stamp);
  if (order_.size() > capacity_) {
    const auto [oldest, oldest_stamp] = order_.front();
    order_.pop_front();
    auto found = ids_.find(oldest);
    if (found != ids_.end() && found->second == oldest_stamp) ids_.erase(found);
  }
}

void RecentIds::Remove(std::uint64_t id) {
  std::lock_guard lock(mutex_);
  ids_.erase(id);
}

bool RecentIds::Contains(std::uint64_t id) const {
  std::lock_guard lock(mutex_);
  return ids_.contains(id);
}

}  // namespace sray
