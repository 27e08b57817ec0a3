#pragma once

// References this process holds to objects other processes own: ObjectRefs
// it unpacked from values (task arguments, results, Gets of values holding
// refs). As in Ray's ownership model the owner keeps an object while any
// process borrows it: a process registers with the owner when it first
// holds a reference (AddBorrower, answered before the task that passed it
// can finish, so the owner never frees it in between) and gives its
// registrations back when its last reference goes (RemoveBorrower).
// The transport is behind BorrowLinks, so the rules are testable without one
// (tests/unit/borrowed_objects_test.cc).
//
// Thread-safety: every member may be called from any thread. Borrow and Lend
// block on the owner's answer (never call them from a transport handler);
// Adopt, Release, RequestStatus and CancelStatusRequest do not block.

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"
#include "core/protocol.h"
#include "sray/internal/runtime.h"

namespace sray::core {

// How a process reaches the owners of the objects it borrows (id.owner is
// the owner's rank); the process runtime implements it over the transport.
class BorrowLinks {
 public:
  virtual ~BorrowLinks() = default;
  // This process's transport address, packed with the references it owns.
  virtual std::string OwnAddress() = 0;
  // Registers `borrower` as a holder of `id` with its owner; waits for the
  // answer (NotFound: the owner no longer has the object).
  virtual Status AddBorrower(const std::string& owner_address, const BorrowerChange& change) = 0;
  virtual void RemoveBorrower(const std::string& owner_address, const BorrowerChange& change) = 0;
  // Asks the owner for the object once it is resolved (rebuilt first, when
  // the request says so); `done` runs once, on any thread, possibly before
  // this returns.
  virtual void RequestStatus(const std::string& owner_address, const StatusRequest& request,
                             std::function<void(Result<ObjectStatus>)> done) = 0;
  // The same, asked of `asked` (a process this one reaches already): the
  // object's owner, or a borrower of it, which asks the owner in turn.
  virtual void RequestStatusFrom(std::uint32_t asked, const StatusRequest& request,
                                 std::function<void(Result<ObjectStatus>)> done) = 0;
};

class BorrowedObjects {
 public:
  // `links` must outlive this.
  BorrowedObjects(std::uint32_t own_rank, BorrowLinks& links);

  // A new reference to `id`, registering this process with the owner if it
  // holds none yet. Never throws: when the owner cannot be reached or no
  // longer has the object, the reference is still made and a Get of it says
  // why (ObjectLostError).
  std::shared_ptr<internal::ObjectHandle> Borrow(const ObjectId& id,
                                                 std::string_view owner_address);
  // A reference whose registration someone else made for this process (the
  // worker that returned a value holding it).
  std::shared_ptr<internal::ObjectHandle> Adopt(const ContainedRef& contained);
  // One reference to `id` was dropped; the last one gives the registrations
  // back to the owner. False when `id` is not borrowed here.
  bool Release(const ObjectId& id);
  // Registers `borrower` with the owner of `id` (held here): the receiver of
  // a task result that holds a reference to it.
  Result<ContainedRef> Lend(const ObjectId& id, std::uint32_t borrower);
  [[nodiscard]] std::optional<std::string> OwnerAddressOf(const ObjectId& id) const;
  // The owner's answer for `id` once resolved; an error when `id` is not
  // borrowed here or the owner cannot be reached. With `lost_on_node`, no
  // copy was found there: the owner rebuilds the object first (StatusRequest).
  // Requests for an object already asked about and not yet answered wait for
  // that one question: a Get or Wait called again and again on a pending
  // object asks its owner once. So `done` may run on any thread, this one
  // included, when another request's question is answered or fails: never
  // call this holding a lock some `done` takes. Returns a ticket for
  // CancelStatusRequest: 0 when nothing can be cancelled (the object is not
  // held here, or a rebuild was asked for, which always asks); cancelling
  // the ticket of a request already answered does nothing.
  std::uint64_t RequestStatus(const ObjectId& id, std::function<void(Result<ObjectStatus>)> done,
                              std::optional<std::uint32_t> lost_on_node = std::nullopt,
                              std::uint16_t rebuilds_seen = 0);
  // The `done` of request `ticket` will not run, unless it runs already: for
  // a Get or Wait that stopped waiting, so that what it left does not pile up
  // while the object stays pending. The question to the owner stays open.
  void CancelStatusRequest(const ObjectId& id, std::uint64_t ticket);
  [[nodiscard]] std::size_t size() const;
  // Objects asked about whose owner has not answered yet, and the requests
  // waiting for those answers.
  [[nodiscard]] std::size_t open_questions() const;
  [[nodiscard]] std::size_t status_waiters() const;

 private:
  using StatusDone = std::function<void(Result<ObjectStatus>)>;
  // The questions to owners not answered yet, with who waits for each
  // answer. Shared with the answers' callbacks, which may run on the
  // transport's thread after this object is gone.
  struct OpenQuestions {
    std::mutex mutex;
    std::uint64_t next_ticket = 1;
    std::unordered_map<ObjectId, std::vector<std::pair<std::uint64_t, StatusDone>>,
                       internal::ObjectIdHash>
        waiting;
    // Hands `answer` to everyone waiting for `id`, and closes the question.
    void Answer(const ObjectId& id, const Result<ObjectStatus>& answer);
  };

  struct Entry {
    std::string owner_address;
    std::uint32_t handles = 0;        // live ObjectHandles in this process
    std::uint32_t registrations = 0;  // held at the owner, given back at the end
  };

  const std::uint32_t own_rank_;
  BorrowLinks& links_;
  mutable std::mutex mutex_;
  std::unordered_map<ObjectId, Entry, internal::ObjectIdHash> entries_;
  const std::shared_ptr<OpenQuestions> questions_ = std::make_shared<OpenQuestions>();
};

}  // namespace sray::core
