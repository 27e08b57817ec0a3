#pragma once

// The ids seen last, at most `capacity` of them, oldest forgotten first: for
// facts that matter only for a while (a late message about an actor that
// retired, a store request from a process that ended), so that a job that
// runs for days does not keep one entry per id it ever saw.
//
// Thread-safety: every member may be called from any thread.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace sray {

class RecentIds {
 public:
  explicit RecentIds(std::size_t capacity) : capacity_(capacity) {}
  // Remembers `id` (no change when it is remembered already).
  void Add(std::uint64_t id);
  // Forgets `id` now; an Add later remembers it anew, for a full capacity.
  void Remove(std::uint64_t id);
  [[nodiscard]] bool Contains(std::uint64_t id) const;

 private:
  const std::size_t capacity_;
  mutable std::mutex mutex_;
  // id -> the stamp of the Add that remembers it; order_ holds every Add's
  // (id, stamp), oldest first, so an entry left by a removed id never
  // forgets the id added again after it.
  std::unordered_map<std::uint64_t, std::uint64_t> ids_;
  std::deque<std::pair<std::uint64_t, std::uint64_t>> order_;
  std::uint64_t next_stamp_ = 0;
};

}  // namespace sray
