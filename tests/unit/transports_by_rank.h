#pragma once

// Transports of one test process that reach each other by rank, as the ranks
// of a job do (their addresses kept in a table here instead of PMIx).
//
// Ownership: the transports made here resolve peers through this object, so
// it must outlive them (declare it before them in a fixture).
// Thread-safety: Make from the test's thread; resolving from any thread.

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "transport/transport.h"

namespace sray::core {

class TransportsByRank {
 public:
  std::unique_ptr<transport::Transport> Make(std::uint32_t rank) {
    transport::TransportOptions options;
    options.rank = rank;
    options.resolve_address = [this](std::uint32_t peer) -> Result<transport::Bytes> {
      std::lock_guard lock(mutex_);
      auto found = addresses_.find(peer);
      if (found == addresses_.end()) return Status::NotFound("no rank " + std::to_string(peer));
      return found->second;
    };
    auto created = transport::Transport::Create(std::move(options));
    EXPECT_TRUE(created.ok()) << created.status().message();
    auto address = (*created)->LocalAddress(false);
    std::lock_guard lock(mutex_);
    addresses_[rank] = *address;
    return std::move(created).value();
  }

  transport::Bytes AddressOf(std::uint32_t rank) {
    std::lock_guard lock(mutex_);
    return addresses_.at(rank);
  }

 private:
  std::mutex mutex_;
  std::map<std::uint32_t, transport::Bytes> addresses_;
};

}  // namespace sray::core
