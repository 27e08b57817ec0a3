#pragma once

// Borrowing over the transport: TransportBorrowLinks reaches the owners of
// borrowed objects directly (their address travels with each reference, and
// is added to the address book on first use), and OwnerService answers other
// processes' borrowing messages for this process's Owner.
//
// Thread-safety: both may be used from any thread.

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>

#include "core/borrowed_objects.h"
#include "core/owner.h"
#include "transport/address_book.h"
#include "transport/transport.h"

namespace sray::core {

// Adds the owner of `reference` to `book` from the address it travels with,
// unless it is `own_rank` or already there, so that it can be reached.
void NoteOwnerAddress(transport::AddressBook& book, std::uint32_t own_rank,
                      const ContainedRef& reference);
// The addresses of borrowers that asked this process about an object (the
// request carries the asker's address), so that an answer given later goes
// on an endpoint of this process's own (transport.h, Responder): in the
// address book while the borrower lives, out of it once its end or its
// node's loss is heard of. A rank already in the book (a worker of this
// node, with its pid) is left as it is.
// Thread-safety: every member may be called from any thread.
class BorrowerAddresses {
 public:
  explicit BorrowerAddresses(std::shared_ptr<transport::AddressBook> book)
      : book_(std::move(book)) {}
  void Note(std::uint32_t rank, const std::string& address);
  void Forget(std::uint32_t rank);
  void ForgetOn(std::uint32_t node);

 private:
  std::shared_ptr<transport::AddressBook> book_;
  std::mutex mutex_;
  std::unordered_set<std::uint32_t> noted_;  // guarded by mutex_
};

class TransportBorrowLinks final : public BorrowLinks {
 public:
  // Both must outlive this.
  TransportBorrowLinks(transport::Transport& transport,
                       std::shared_ptr<transport::AddressBook> book);

  std::string OwnAddress() override { return own_address_; }
  Status AddBorrower(const std::string& owner_address, const BorrowerChange& change) override;
  void RemoveBorrower(const std::string& owner_address, const BorrowerChange& change) override;
  void RequestStatus(const std::string& owner_address, const StatusRequest& request,
                     std::function<void(Result<ObjectStatus>)> done) override;
  void RequestStatusFrom(std::uint32_t asked, const StatusRequest& request,
                         std::function<void(Result<ObjectStatus>)> done) override;

 private:
  // The owner's rank, reachable from now on.
  std::uint32_t Reach(const ObjectId& id, const std::string& owner_address);

  transport::Transport& transport_;
  std::shared_ptr<transport::AddressBook> book_;
  std::string own_address_;
};

// Serves what other processes send an Owner (kOwnerOutcome: its tasks'
// outcomes; kBorrowerGone and kBorrowerNodeLost: a process or a whole node of
// the job ended, from its node manager `node_manager_rank`; kAddBorrower, kRemoveBorrower and
// kObjectStatus from borrowers) while it lives; destroy it before the Owner and the transport
// (messages arriving afterwards are refused, and answers still owed are dropped: their callers get
// an error).
class OwnerService {
 public:
  // `book`: where askers' addresses go, for answers given later.
  OwnerService(transport::Transport& transport, Owner& owner, std::uint32_t node_manager_rank,
               std::shared_ptr<transport::AddressBook> book);
  ~OwnerService();
  OwnerService(const OwnerService&) = delete;
  OwnerService& operator=(const OwnerService&) = delete;

  // The owner while the service lives. Handlers may run on several threads
  // and re-enter (an outcome's work can deliver another), so no lock is
  // held: each counts itself active, and the destructor waits for them.
  struct Guard {
    std::atomic<Owner*> owner{nullptr};
    std::atomic<int> active{0};
    // Runs `work` with the owner if it is still there; says whether it ran.
    template <typename Work>
    bool With(Work&& work) {
      active.fetch_add(1);
      Owner* current = owner.load();
      if (current != nullptr) work(*current);
      active.fetch_sub(1);
      return current != nullptr;
    }
  };

 private:
  std::shared_ptr<Guard> guard_;
};

}  // namespace sray::core
