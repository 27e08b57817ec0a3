#include "train/rendezvous_table.h"

#include <charconv>
#include <stdexcept>
#include <system_error>

namespace sray::train::internal {

void RendezvousTable::Set(const std::string& key, const std::string& value) {
  std::lock_guard lock(mutex_);
  values_[key] = value;
}

std::optional<std::vector<std::string>> RendezvousTable::GetAll(const std::vector<std::string>& keys) {
  std::lock_guard lock(mutex_);
  std::vector<std::string> found;
  found.reserve(keys.size());
  for (const std::string& key : keys) {
    auto entry = values_.find(key);
    if (entry == values_.end()) return std::nullopt;
    found.push_back(entry->second);
  }
  return found;
}

std::int64_t RendezvousTable::Add(const std::string& key, std::int64_t delta) {
  std::lock_guard lock(mutex_);
  std::string& value = values_[key];
  std::int64_t count = 0;
  if (!value.empty()) {
    const char* end = value.data() + value.size();
    auto [stopped, error] = std::from_chars(value.data(), end, count);
    if (error != std::errc() || stopped != end) {
      throw std::invalid_argument("the rendezvous key '" + key + "' holds a value, not a count, and cannot be added to");
    }
  }
  count += delta;
  value = std::to_string(count);
  return count;
}

std::string RendezvousTable::CompareSet(const std::string& key, const std::string& expected,
                                        const std::string& desired) {
  std::lock_guard lock(mutex_);
  auto entry = values_.find(key);
  if (entry == values_.end()) {
    if (!expected.empty()) return expected;  // as c10d: nothing set, the expectation returned
    values_.emplace(key, desired);
    return desired;
  }
  if (entry->second == expected) entry->second = desired;
  return entry->second;
}

bool RendezvousTable::Delete(const std::string& key) {
  std::lock_guard lock(mutex_);
  return values_.erase(key) > 0;
}

std::int64_t RendezvousTable::NumKeys() {
  std::lock_guard lock(mutex_);
  return static_cast<std::int64_t>(values_.size());
}

bool RendezvousTable::Check(const std::vector<std::string>& keys) {
  std::lock_guard lock(mutex_);
  for (const std::string& key : keys) {
    if (!values_.contains(key)) return false;
  }
  return true;
}

}  // namespace sray::train::internal
