// Owner's part in references shared between processes: handing out
// references unpacked from values, counting the processes that borrow
// objects owned here, answering their Gets, and registering the receiver of
// a task result that holds references.

#include <algorithm>
#include <future>
#include <memory>
#include <set>

#include "core/owner.h"

namespace sray::core {

void Owner::SetBorrowLinks(BorrowLinks& links) {
  borrow_links_.store(&links);
  borrowed_ = std::make_unique<BorrowedObjects>(identity_.rank, links);
}

std::shared_ptr<internal::ObjectHandle> Owner::Borrow(const internal::ObjectId& id,
                                                      std::string_view owner_address) {
  if (!Owns(id)) {
    if (!borrowed_) {
      // A handle all the same: a Get of it says the owner is out of reach.
      return internal::NewObjectHandle(id);
    }
    return borrowed_->Borrow(id, owner_address);
  }
  std::lock_guard lock(mutex_);
  auto found = objects_.find(id);
  // Unknown: freed already; a Get of the handle says so.
  if (found != objects_.end()) found->second.handles++;
  return internal::NewObjectHandle(id);
}

std::string Owner::OwnerAddress(const internal::ObjectId& id) {
  if (Owns(id)) {
    BorrowLinks* links = borrow_links_.load();
    return links != nullptr ? links->OwnAddress() : std::string();
  }
  if (!borrowed_) return {};
  return borrowed_->OwnerAddressOf(id).value_or(std::string());
}

std::shared_ptr<internal::ObjectHandle> Owner::AdoptLocked(const ContainedRef& reference) {
  if (!Owns(reference.id)) {
    if (!borrowed_) return internal::NewObjectHandle(reference.id);
    return borrowed_->Adopt(reference);
  }
  // Lend registered this process as a borrower of its own object; that
  // registration becomes a handle here.
  auto found = objects_.find(reference.id);
  if (found != objects_.end()) {
    ObjectEntry& entry = found->second;
    entry.handles++;
    if (entry.sharing) {
      auto self = entry.sharing->borrowers.find(identity_.rank);
      if (self != entry.sharing->borrowers.end() && --self->second == 0) {
        entry.sharing->borrowers.erase(self);
      }
    }
  }
  return internal::NewObjectHandle(reference.id);
}

Status Owner::AddBorrower(const BorrowerChange& change) {
  std::lock_guard lock(mutex_);
  auto found = objects_.find(change.id);
  if (found == objects_.end()) {
    return Status::NotFound("object " + change.id.ToString() + " was already freed by its owner");
  }
  // Answered as done: the registration of an ended process would never go.
  if (IsEndedBorrowerLocked(change.borrower)) return Status::Ok();
  found->second.shared().borrowers[change.borrower] += change.count;
  borrower_ranks_.insert(change.borrower);
  return Status::Ok();
}

bool Owner::HeardEnded(std::uint32_t rank) {
  std::lock_guard lock(mutex_);
  return IsEndedBorrowerLocked(rank);
}

bool Owner::IsEndedBorrowerLocked(std::uint32_t rank) const {
  if (ended_borrowers_.Contains(rank)) return true;
  const std::optional<std::uint32_t> node = NodeOfWorkerRank(rank);
  return node && lost_borrower_nodes_.contains(*node);
}

void Owner::RemoveBorrower(const BorrowerChange& change) {
  std::vector<std::pair<internal::ObjectId, std::uint32_t>> to_free;
  std::vector<std::shared_ptr<internal::ObjectHandle>> released;
  {
    std::lock_guard lock(mutex_);
    auto found = objects_.find(change.id);
    if (found == objects_.end() || !found->second.sharing) return;
    auto& borrowers = found->second.sharing->borrowers;
    auto borrower = borrowers.find(change.borrower);
    if (borrower == borrowers.end()) return;
    borrower->second -= std::min(borrower->second, change.count);
    if (borrower->second == 0) borrowers.erase(borrower);
    ReleaseIfUnusedLocked(change.id, to_free, released);
  }
  for (const auto& [object, node] : to_free) store_.Free(object, node);
  released.clear();  // may call RemoveReference, which takes mutex_
}

void Owner::ForgetBorrower(std::uint32_t rank) {
  ended_borrowers_.Add(rank);
  DropBorrowers({rank});
}

void Owner::ForgetBorrowersOn(std::uint32_t node) {
  std::vector<std::uint32_t> on_node;
  {
    // Under the same lock as the registrations: none from that node slips
    // in between the two.
    std::lock_guard lock(mutex_);
    lost_borrower_nodes_.insert(node);
    for (const std::uint32_t rank : borrower_ranks_) {
      if (NodeOfWorkerRank(rank) == node) on_node.push_back(rank);
    }
  }
  DropBorrowers(on_node);
}

void Owner::DropBorrowers(const std::vector<std::uint32_t>& ranks) {
  std::vector<std::pair<internal::ObjectId, std::uint32_t>> to_free;
  std::vector<std::shared_ptr<internal::ObjectHandle>> released;
  {
    std::lock_guard lock(mutex_);
    // Most processes that end never borrowed from this one: no walk then.
    std::vector<std::uint32_t> gone;
    for (const std::uint32_t rank : ranks) {
      if (borrower_ranks_.erase(rank) > 0) gone.push_back(rank);
    }
    if (gone.empty()) return;
    std::vector<internal::ObjectId> lent;
    for (auto& [id, entry] : objects_) {
      if (!entry.sharing) continue;
      bool dropped = false;
      for (const std::uint32_t rank : gone)
        dropped = entry.sharing->borrowers.erase(rank) > 0 || dropped;
      if (dropped) lent.push_back(id);
    }
    // Apart from the walk: a release erases entries.
    for (const auto& id : lent) ReleaseIfUnusedLocked(id, to_free, released);
  }
  for (const auto& [object, node] : to_free) store_.Free(object, node);
  released.clear();  // may call RemoveReference, which takes mutex_
}

ObjectStatus Owner::StatusOf(const ObjectEntry& entry) {
  ObjectStatus status;
  if (entry.state == State::kFailed) {
    status.kind = static_cast<std::uint8_t>(ObjectStatusKind::kFailed);
    status.failure = *entry.failure;
  } else if (entry.in_store) {
    status.kind = static_cast<std::uint8_t>(ObjectStatusKind::kStored);
    status.node = entry.node;
    status.size = entry.size;
    status.rebuilds = entry.rebuilds;
  } else {
    status.kind = static_cast<std::uint8_t>(ObjectStatusKind::kInline);
    status.value = entry.inline_value;
  }
  return status;
}

void Owner::WhenResolved(const internal::ObjectId& id, std::function<void(ObjectStatus)> done) {
  ObjectStatus status;
  {
    std::lock_guard lock(mutex_);
    auto found = objects_.find(id);
    if (found == objects_.end()) {
      status.kind = static_cast<std::uint8_t>(ObjectStatusKind::kUnknown);
    } else if (found->second.state == State::kPending) {
      found->second.shared().status_waiters.push_back(std::move(done));
      return;
    } else {
      status = StatusOf(found->second);
    }
  }
  done(std::move(status));
}

void Owner::WhenRebuilt(const internal::ObjectId& id, std::uint32_t lost_on_node,
                        std::uint16_t rebuilds_seen, std::function<void(ObjectStatus)> done) {
  if (!Owns(id) && borrowed_) {
    borrowed_->RequestStatus(
        id,
        [id, lost_on_node, done = std::move(done)](Result<ObjectStatus> status) {
          if (status.ok()) {
            done(std::move(status).value());
            return;
          }
          ObjectStatus failed;
          failed.kind = static_cast<std::uint8_t>(ObjectStatusKind::kFailed);
          failed.failure.kind = static_cast<std::uint8_t>(OutcomeKind::kObjectLost);
          failed.failure.node = lost_on_node;
          failed.failure.error_message =
              "object " + id.ToString() + " is lost: node " + std::to_string(lost_on_node) +
              " no longer has it, and the caller could not have its owner rebuild it (" +
              status.status().message() +
              "): keep a reference to it in the caller until the call has answered";
          done(std::move(failed));
        },
        lost_on_node, rebuilds_seen);
    return;
  }
  std::vector<TaskSpec> to_send;
  std::vector<std::pair<internal::ObjectId, std::uint32_t>> to_free;
  std::optional<ObjectStatus> lost;
  {
    std::lock_guard lock(mutex_);
    auto found = objects_.find(id);
    if (found != objects_.end() && found->second.state == State::kReady && found->second.in_store &&
        !ReconstructLocked(id, lost_on_node, rebuilds_seen, to_send, to_free)) {
      lost.emplace();
      lost->kind = static_cast<std::uint8_t>(ObjectStatusKind::kFailed);
      lost->failure.kind = static_cast<std::uint8_t>(OutcomeKind::kObjectLost);
      lost->failure.node = lost_on_node;
      lost->failure.error_message =
          "object " + id.ToString() + " is lost: node " + std::to_string(lost_on_node) +
          " no longer has it, and its owner (rank " + std::to_string(identity_.rank) +
          ") cannot recompute it: " + WhyNotRecomputedLocked(id, found->second);
    }
  }
  for (const auto& [object, node] : to_free) store_.Free(object, node);
  for (auto& spec : to_send) SendTask(std::move(spec));
  if (lost) {
    done(std::move(*lost));
    return;
  }
  WhenResolved(id, std::move(done));
}

Result<ObjectStatus> Owner::AskCallerToRebuild(const ArgumentSpec& argument, std::uint32_t caller) {
  BorrowLinks* links = borrow_links_.load();
  if (links == nullptr) return Status::Unavailable("this process cannot reach other owners");
  auto answer = std::make_shared<std::promise<Result<ObjectStatus>>>();
  auto answered = answer->get_future();
  links->RequestStatusFrom(
      caller,
      StatusRequest{.id = argument.id,
                    .rebuild = true,
                    .lost_on_node = argument.node,
                    .rebuilds_seen = argument.rebuilds_seen},
      [answer](Result<ObjectStatus> status) { answer->set_value(std::move(status)); });
  // The owner answers once the object is ready again, however long its
  // producer runs, or the transport fails the request when the owner dies.
  // Meanwhile this process lends its CPUs, as in Get: the producer may need them.
  BlockedScope blocked(blocking_notifier_, blocked_depth_);
  blocked.Announce();
  return answered.get();
}

void Owner::DropStatusWaiters() {
  std::vector<std::function<void(ObjectStatus)>> dropped;
  {
    std::lock_guard lock(mutex_);
    for (auto& [id, entry] : objects_) {
      if (!entry.sharing) continue;
      for (auto& waiter : entry.sharing->status_waiters) dropped.push_back(std::move(waiter));
      entry.sharing->status_waiters.clear();
    }
  }
}

Result<std::vector<ContainedRef>> Owner::Lend(const internal::ContainedRefs& contained,
                                              std::uint32_t receiver) {
  std::vector<ContainedRef> lent;
  std::set<internal::ObjectId> seen;
  bool receiver_ended = false;
  {
    std::lock_guard lock(mutex_);
    receiver_ended = IsEndedBorrowerLocked(receiver);
  }
  for (const auto& handle : contained) {
    const internal::ObjectId& id = handle->id();
    if (!seen.insert(id).second) continue;
    // A receiver known to have ended never gives registrations back, and
    // another owner may not have heard of its end: none is made.
    if (receiver_ended) {
      lent.push_back(ContainedRef{.id = id, .owner_address = OwnerAddress(id)});
      continue;
    }
    if (!Owns(id)) {
      Result<ContainedRef> reference =
          borrowed_
              ? borrowed_->Lend(id, receiver)
              : Result<ContainedRef>(Status::Unavailable(
                    "object " + id.ToString() + " belongs to a process this one cannot reach"));
      if (!reference.ok()) {
        // What was lent already would stay registered for a result that
        // never arrives.
        for (const ContainedRef& done : lent) {
          const BorrowerChange change{.id = done.id, .borrower = receiver, .count = 1};
          if (Owns(done.id)) {
            RemoveBorrower(change);
          } else if (BorrowLinks* links = borrow_links_.load()) {
            links->RemoveBorrower(done.owner_address, change);
          }
        }
        return reference.status();
      }
      lent.push_back(std::move(reference).value());
      continue;
    }
    {
      std::lock_guard lock(mutex_);
      auto found = objects_.find(id);
      // Held by `handle`, so still here. The receiver's end may have been
      // passed on since the check above.
      if (found != objects_.end() && !IsEndedBorrowerLocked(receiver)) {
        found->second.shared().borrowers[receiver]++;
        borrower_ranks_.insert(receiver);
      }
    }
    lent.push_back(ContainedRef{.id = id, .owner_address = OwnerAddress(id)});
  }
  return lent;
}

void Owner::DiscardLent(const std::vector<ContainedRef>& lent) {
  std::vector<std::shared_ptr<internal::ObjectHandle>> released;
  {
    std::lock_guard lock(mutex_);
    for (const ContainedRef& reference : lent) released.push_back(AdoptLocked(reference));
  }
  released.clear();  // each handle gives its reference back, without the lock
}

void Owner::DiscardOrphanedResult(const OrphanedResult& orphan) {
  store_.DiscardOrphan(orphan);
}

void Owner::OnArgumentStatus(const OwnerQuestion& question, Result<ObjectStatus> status) {
  Followups followups;
  {
    std::lock_guard lock(mutex_);
    auto found = tasks_.find(question.task_id);
    if (found == tasks_.end()) return;
    PendingTask& task = found->second;
    std::erase(task.asked_owner, question.index);
    ArgumentSpec& argument = task.spec.arguments.at(question.index);
    const auto kind =
        status.ok() ? static_cast<ObjectStatusKind>(status->kind) : ObjectStatusKind::kUnknown;
    if (kind == ObjectStatusKind::kInline) {
      argument.by_reference = false;
      argument.value = std::move(status->value);
    } else if (kind == ObjectStatusKind::kStored) {
      argument.node = status->node;
      argument.size = status->size;
      argument.rebuilds_seen = static_cast<std::uint16_t>(status->rebuilds);
    } else if (kind == ObjectStatusKind::kFailed) {
      TaskOutcome failure = std::move(status->failure);
      failure.task_id = task.spec.task_id;
      failure.attempt = task.spec.attempt;
      failure.return_id = task.spec.return_id;
      failure.owner_rank = task.spec.owner_rank;
      failure.owner_node = task.spec.owner_node;
      followups.to_fail.push_back(std::move(failure));
    } else {
      followups.to_fail.push_back(
          FailedOutcome(task.spec, OutcomeKind::kSystemError,
                        "argument object " + question.id.ToString() + " is lost: its owner (rank " +
                            std::to_string(question.id.owner) + ") " +
                            (status.ok() ? std::string("freed it")
                                         : "did not answer: " + status.status().message())));
    }
    if (followups.to_fail.empty()) ResolveArgumentsLocked(task, followups);
  }
  RunFollowups(std::move(followups));
}

Owner::Counts Owner::counts() {
  std::lock_guard lock(mutex_);
  return Counts{.owned = objects_.size(),
                .borrowed = borrowed_ ? borrowed_->size() : 0,
                .waiting_for_owners = borrowed_ ? borrowed_->status_waiters() : 0};
}

}  // namespace sray::core
