#pragma once

// Addresses of peers that PMIx does not know: the workers a node manager
// starts itself. Each registers its UCX worker address (and pid, for the
// liveness probe) when it starts; the transport's resolver looks here first.
//
// Thread-safety: every member may be called from any thread.

#include <sys/types.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "transport/bytes.h"

namespace sray::transport {

class AddressBook {
 public:
  struct Entry {
    Bytes address;
    pid_t pid = 0;
    std::string description;  // "worker 3 of node 1 (pid 1234)"
  };

  void Add(std::uint32_t rank, Entry entry) {
    std::lock_guard lock(mutex_);
    entries_[rank] = std::move(entry);
  }
  void Remove(std::uint32_t rank) {
    std::lock_guard lock(mutex_);
    entries_.erase(rank);
  }
  std::optional<Entry> Find(std::uint32_t rank) const {
    std::lock_guard lock(mutex_);
    auto found = entries_.find(rank);
    if (found == entries_.end()) return std::nullopt;
    return found->second;
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::uint32_t, Entry> entries_;
};

}  // namespace sray::transport
