#include "core/borrowed_objects.h"

#include <algorithm>
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
    if (entry.registrations > 0) return internal::NewObjectHandle(id);
    address = entry.owner_address;
  }
  // The handle exists before the answer: if it is dropped meanwhile, its
  // Release finds registrations == 0 and the entry gone, and the late
  // registration below is given back at once.
  auto handle = internal::NewObjectHandle(id);
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
  return internal::NewObjectHandle(contained.id);
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

std::uint64_t BorrowedObjects::RequestStatus(const ObjectId& id, StatusDone done,
                                             std::optional<std::uint32_t> lost_on_node,
                                             std::uint16_t rebuilds_seen) {
  auto address = OwnerAddressOf(id);
  if (!address) {
    done(Status::NotFound("object " + id.ToString() + " is not held by this process"));
    return 0;
  }
  if (lost_on_node) {
    // Each loss is news to the owner: never folded into another question.
    links_.RequestStatus(*address,
                         StatusRequest{.id = id,
                                       .rebuild = true,
                                       .lost_on_node = *lost_on_node,
                                       .rebuilds_seen = rebuilds_seen},
                         std::move(done));
    return 0;
  }
  std::uint64_t ticket = 0;
  {
    std::lock_guard lock(questions_->mutex);
    ticket = questions_->next_ticket++;
    auto found = questions_->waiting.find(id);
    if (found != questions_->waiting.end()) {
      found->second.emplace_back(ticket, std::move(done));
      return ticket;
    }
    std::vector<std::pair<std::uint64_t, StatusDone>> waiters;
    waiters.emplace_back(ticket, std::move(done));
    questions_->waiting.emplace(id, std::move(waiters));
  }
  try {
    links_.RequestStatus(*address, StatusRequest{.id = id},
                         [questions = questions_, id](Result<ObjectStatus> answer) {
                           questions->Answer(id, answer);
                         });
  } catch (...) {
    // Not asked: a question left open would hold every later request for
    // this object for ever.
    questions_->Answer(id, Status::Internal("cannot ask the owner of object " + id.ToString()));
    throw;
  }
  return ticket;
}

void BorrowedObjects::OpenQuestions::Answer(const ObjectId& id,
                                            const Result<ObjectStatus>& answer) {
  std::vector<std::pair<std::uint64_t, StatusDone>> waiters;
  {
    std::lock_guard lock(mutex);
    auto found = waiting.find(id);
    if (found == waiting.end()) return;
    waiters = std::move(found->second);
    waiting.erase(found);
  }
  for (auto& [ticket, done] : waiters) done(answer);
}

void BorrowedObjects::CancelStatusRequest(const ObjectId& id, std::uint64_t ticket) {
  if (ticket == 0) return;
  StatusDone cancelled;  // destroyed outside the lock: it may hold the last reference to anything
  std::lock_guard lock(questions_->mutex);
  auto found = questions_->waiting.find(id);
  if (found == questions_->waiting.end()) return;
  auto& waiters = found->second;
  auto waiter = std::find_if(waiters.begin(), waiters.end(),
                             [ticket](const auto& entry) { return entry.first == ticket; });
  if (waiter == waiters.end()) return;
  cancelled = std::move(waiter->second);
  waiters.erase(waiter);
}

std::size_t BorrowedObjects::open_questions() const {
  std::lock_guard lock(questions_->mutex);
  return questions_->waiting.size();
}

std::size_t BorrowedObjects::status_waiters() const {
  std::lock_guard lock(questions_->mutex);
  std::size_t count = 0;
  for (const auto& [id, waiters] : questions_->waiting) count += waiters.size();
  return count;
}

std::size_t BorrowedObjects::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

}  // namespace sray::core
