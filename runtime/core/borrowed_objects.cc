#include "core/borrowed_objects.h"

#include <utility>

namespace sray::core {

BorrowedObjects::BorrowedObjects(std::uint32_t own_rank, BorrowLinks& links)
    : own_rank_(own_rank), links_(links) {}

std::shared_ptr<internal::ObjectHandle> BorrowedObjects::Borrow(const ObjectId& id,
                                                                std::string_view owner_address) {
  std::string address;
  {
    std::lock_guard lock(mutex_);
    Entry& entry = entries_[id];
    if (entry.owner_address.empty()) entry.owner_address = std::string(owner_address);
    entry.handles++;
    if (entry.registrations > 0) return std::make_shared<internal::ObjectHandle>(id);
    address = entry.owner_address;
  }
  // The handle exists before the answer: if it is dropped meanwhile, its
  // Release finds registrations == 0 and the entry gone, and the late
  // registration below is given back at once.
  auto handle = std::make_shared<internal::ObjectHandle>(id);
  const Status registered =
      links_.AddBorrower(address, BorrowerChange{.id = id, .borrower = own_rank_, .count = 1});
  if (!registered.ok()) return handle;  // a Get of it asks the owner and says why
  bool give_back = false;
  {
    std::lock_guard lock(mutex_);
    auto found = entries_.find(id);
    if (found == entries_.end()) {
      give_back = true;
    } else {
      found->second.registrations++;
    }
  }
  if (give_back) {
    links_.RemoveBorrower(address, BorrowerChange{.id = id, .borrower = own_rank_, .count = 1});
  }
  return handle;
}

std::shared_ptr<internal::ObjectHandle> BorrowedObjects::Adopt(const ContainedRef& contained) {
  std::lock_guard lock(mutex_);
  Entry& entry = entries_[contained.id];
  if (entry.owner_address.empty()) entry.owner_address = contained.owner_address;
  entry.handles++;
  entry.registrations++;
  return std::make_shared<internal::ObjectHandle>(contained.id);
}

bool BorrowedObjects::Release(const ObjectId& id) {
  std::string address;
  std::uint32_t registrations = 0;
  {
    std::lock_guard lock(mutex_);
    auto found = entries_.find(id);
    if (found == entries_.end()) return false;
    if (found->second.handles > 0 && --found->second.handles > 0) return true;
    address = std::move(found->second.owner_address);
    registrations = found->second.registrations;
    entries_.erase(found);
  }
  if (registrations > 0) {
    links_.RemoveBorrower(address,
                          BorrowerChange{.id = id, .borrower = own_rank_, .count = registrations});
  }
  return true;
}

Result<ContainedRef> BorrowedObjects::Lend(const ObjectId& id, std::uint32_t borrower) {
  auto address = OwnerAddressOf(id);
  if (!address) {
    return Status::NotFound("object " + id.ToString() + " is not borrowed by this process");
  }
  const Status registered =
      links_.AddBorrower(*address, BorrowerChange{.id = id, .borrower = borrower, .count = 1});
  if (!registered.ok()) return registered;
  return ContainedRef{.id = id, .owner_address = std::move(*address)};
}

std::optional<std::string> BorrowedObjects::OwnerAddressOf(const ObjectId& id) const {
  std::lock_guard lock(mutex_);
  auto found = entries_.find(id);
  if (found == entries_.end()) return std::nullopt;
  return found->second.owner_address;
}

void BorrowedObjects::RequestStatus(const ObjectId& id,
                                    std::function<void(Result<ObjectStatus>)> done,
                                    std::optional<std::uint32_t> lost_on_node,
                                    std::uint16_t rebuilds_seen) {
  auto address = OwnerAddressOf(id);
  if (!address) {
    done(Status::NotFound("object " + id.ToString() + " is not held by this process"));
    return;
  }
  links_.RequestStatus(*address,
                       StatusRequest{.id = id,
                                     .rebuild = lost_on_node.has_value(),
                                     .lost_on_node = lost_on_node.value_or(0),
                                     .rebuilds_seen = rebuilds_seen},
                       std::move(done));
}

std::size_t BorrowedObjects::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

}  // namespace sray::core
