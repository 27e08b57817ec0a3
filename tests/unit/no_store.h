#pragma once

// A StoreAccess for Owner tests whose objects are all small enough to stay
// inline: every store operation fails or does nothing.

#include <cstdint>
#include <string>

#include "core/store_access.h"

namespace sray::core {

class NoStore : public StoreAccess {
 public:
  Result<std::string> Create(const ObjectId&, std::uint64_t, std::int32_t) override {
    return Status::Internal("no store in this test");
  }
  Status Seal(const ObjectId&, std::uint64_t, std::int32_t, SealWait) override {
    return Status::Internal("no store in this test");
  }
  Result<std::string> MakeLocal(const ObjectId&, std::uint32_t, std::uint64_t) override {
    return Status::Internal("no store in this test");
  }
  void Free(const ObjectId&, std::uint32_t) override {}
  void DiscardOrphan(const OrphanedResult&) override {}
};

}  // namespace sray::core
