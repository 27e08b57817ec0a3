#pragma once

// Borrowing over the transport: TransportBorrowLinks reaches the owners of
// borrowed objects directly (their address travels with each reference, and
// is added to the address book on first use), and OwnerService answers other
// processes' borrowing messages for this process's Owner.
//
// Thread-safety: both may be used from any thread.

#include <memory>
#include <mutex>
#include <string>

#include "core/borrowed_objects.h"
#include "core/owner.h"
#include "transport/address_book.h"
#include "transport/transport.h"

namespace sray::core {

class TransportBorrowLinks final : public BorrowLinks {
 public:
  // Both must outlive this.
  TransportBorrowLinks(transport::Transport& transport,
                       std::shared_ptr<transport::AddressBook> book);

  std::string OwnAddress() override { return own_address_; }
  Status AddBorrower(const std::string& owner_address, const BorrowerChange& change) override;
  void RemoveBorrower(const std::string& owner_address, const BorrowerChange& change) override;
  void RequestStatus(const std::string& owner_address, const ObjectId& id,
                     std::function<void(Result<ObjectStatus>)> done) override;

 private:
  // The owner's rank, reachable from now on.
  std::uint32_t Reach(const ObjectId& id, const std::string& owner_address);

  transport::Transport& transport_;
  std::shared_ptr<transport::AddressBook> book_;
  std::string own_address_;
};

// Serves kAddBorrower, kRemoveBorrower and kObjectStatus for `owner` while
// it lives; destroy it before the Owner and the transport (messages arriving
// afterwards are refused, and answers still owed are dropped: their callers
// get an error).
class OwnerService {
 public:
  OwnerService(transport::Transport& transport, Owner& owner);
  ~OwnerService();
  OwnerService(const OwnerService&) = delete;
  OwnerService& operator=(const OwnerService&) = delete;

  struct Guard {
    std::mutex mutex;
    Owner* owner = nullptr;
  };

 private:
  std::shared_ptr<Guard> guard_;
};

}  // namespace sray::core
