// Owner's Get and Wait: of objects owned here (their state is in this
// process) and of borrowed ones (their owners answer kObjectStatus).

#include <algorithm>
#include <atomic>
#include <numeric>
#include <optional>

#include "common/deadline.h"
#include "common/log.h"
#include "core/owner.h"
#include "object/mapped_file.h"
#include "sray/errors.h"

namespace sray::core {
namespace {

// How often a borrower's Get has the owner rebuild a copy that is lost again
// before it reads it.
constexpr int kBorrowedRebuildsAsked = 3;

std::string GetTimeoutMessage(std::chrono::milliseconds timeout, const internal::ObjectId& id,
                              const std::string& producer) {
  return "sray: Get timed out after " + std::to_string(timeout.count()) + " ms: object " +
         id.ToString() + " (result of task " + producer +
         ") is not ready yet: wait longer, or check with Wait first";
}

class InlineValue final : public internal::ObjectValue {
 public:
  explicit InlineValue(std::string bytes) : bytes_(std::move(bytes)) {}
  [[nodiscard]] std::string_view bytes() const override { return bytes_; }

 private:
  std::string bytes_;
};

// Reads straight from the node's shared memory: the zero-copy same-node Get.
class MappedValue final : public internal::ObjectValue {
 public:
  explicit MappedValue(std::unique_ptr<object::MappedFile> file) : file_(std::move(file)) {}
  [[nodiscard]] std::string_view bytes() const override { return file_->view(); }

 private:
  std::unique_ptr<object::MappedFile> file_;
};

}  // namespace

// One answer slot per borrowed id. Callbacks fill it from the transport's
// thread, possibly after the Get that asked gave up.
struct Owner::OwnerAnswers {
  explicit OwnerAnswers(std::size_t count) : answers(count), tickets(count, 0) {}
  std::mutex mutex;
  std::vector<std::optional<Result<ObjectStatus>>> answers;
  std::atomic<std::size_t> arrived{0};
  std::vector<std::uint64_t> tickets;  // BorrowedObjects' requests, to cancel
};

// Ends the requests of a Get or Wait that stops waiting, so that a caller
// asking again and again about a pending object leaves nothing behind.
class Owner::StopAskingOwners {
 public:
  StopAskingOwners(BorrowedObjects* borrowed, const std::vector<internal::ObjectId>& ids,
                   std::shared_ptr<OwnerAnswers> answers)
      : borrowed_(borrowed), ids_(ids), answers_(std::move(answers)) {}
  ~StopAskingOwners() {
    if (borrowed_ == nullptr || !answers_) return;
    for (std::size_t index = 0; index < ids_.size(); ++index) {
      borrowed_->CancelStatusRequest(ids_[index], answers_->tickets[index]);
    }
  }
  StopAskingOwners(const StopAskingOwners&) = delete;
  StopAskingOwners& operator=(const StopAskingOwners&) = delete;

 private:
  BorrowedObjects* const borrowed_;
  const std::vector<internal::ObjectId>& ids_;
  const std::shared_ptr<OwnerAnswers> answers_;
};

std::shared_ptr<Owner::OwnerAnswers> Owner::AskOwners(const std::vector<internal::ObjectId>& ids) {
  auto answers = std::make_shared<OwnerAnswers>(ids.size());
  if (!borrowed_) {
    for (auto& answer : answers->answers) {
      answer = Status::Unavailable(
          "this process cannot reach other processes (local mode, or after Shutdown)");
    }
    answers->arrived = ids.size();
    return answers;
  }
  for (std::size_t index = 0; index < ids.size(); ++index) {
    answers->tickets[index] = borrowed_->RequestStatus(ids[index], AnswerInto(answers, index));
  }
  return answers;
}

std::function<void(Result<ObjectStatus>)> Owner::AnswerInto(std::shared_ptr<OwnerAnswers> answers,
                                                            std::size_t index) {
  return [answers = std::move(answers), index, token = wake_token_](Result<ObjectStatus> status) {
    {
      std::lock_guard lock(answers->mutex);
      answers->answers[index] = std::move(status);
    }
    answers->arrived.fetch_add(1);
    std::lock_guard lock(token->mutex);
    if (token->owner != nullptr) token->owner->WakeWaiters();
  };
}

void Owner::AskOwnersToRebuild(const std::vector<internal::ObjectId>& ids,
                               const std::vector<std::size_t>& lost,
                               std::vector<Result<ObjectStatus>>& latest,
                               std::chrono::steady_clock::time_point deadline,
                               internal::Timeout timeout, BlockedScope& blocked) {
  auto answers = std::make_shared<OwnerAnswers>(lost.size());
  // Not withdrawn on a timeout: a rebuild is asked for once per loss.
  for (std::size_t asked = 0; asked < lost.size(); ++asked) {
    const ObjectStatus& copy = *latest[lost[asked]];
    (void)borrowed_->RequestStatus(ids[lost[asked]], AnswerInto(answers, asked), copy.node,
                                   copy.rebuilds);
  }
  // An answer that settles its object's fate (the owner cannot rebuild it)
  // is thrown at once, not after the other rebuilds: one of them may take
  // long or never come.
  const auto failed_answer = [&]() -> std::optional<std::size_t> {
    std::lock_guard answers_lock(answers->mutex);
    for (std::size_t asked = 0; asked < lost.size(); ++asked) {
      if (answers->answers[asked] && IsFinalFailure(*answers->answers[asked])) return asked;
    }
    return std::nullopt;
  };
  std::optional<std::size_t> failed;
  {
    std::unique_lock lock(mutex_);
    const bool answered = WaitHelping(lock, deadline, blocked, [&] {
      if (answers->arrived == lost.size()) return true;
      failed = failed_answer();
      return failed.has_value();
    });
    if (!failed) failed = failed_answer();
    if (failed) {
      lock.unlock();
      const Result<ObjectStatus> answer = [&] {
        std::lock_guard answers_lock(answers->mutex);
        return *answers->answers[*failed];
      }();
      std::shared_ptr<const internal::ObjectValue> unused;
      (void)ReadBorrowed(ids[lost[*failed]], answer, /*rebuilds_asked=*/1, unused);  // throws
    }
    if (!answered) {
      std::lock_guard answers_lock(answers->mutex);
      for (std::size_t asked = 0; asked < lost.size(); ++asked) {
        if (answers->answers[asked]) continue;
        const internal::ObjectId& id = ids[lost[asked]];
        throw GetTimeoutError("sray: Get timed out after " + std::to_string(timeout->count()) +
                              " ms: object " + id.ToString() + " was lost on node " +
                              std::to_string(latest[lost[asked]]->node) + " and its owner (rank " +
                              std::to_string(id.owner) +
                              ") has not answered with a new copy yet: wait longer, or check "
                              "with Wait first");
      }
    }
  }
  std::lock_guard answers_lock(answers->mutex);
  for (std::size_t asked = 0; asked < lost.size(); ++asked) {
    latest[lost[asked]] = std::move(*answers->answers[asked]);
  }
}

Owner::WatchScope::WatchScope(Owner& owner, const std::vector<internal::ObjectId>& ids,
                              Waiter& waiter)
    : owner_(owner), ids_(ids), waiter_(waiter) {
  for (const auto& id : ids_) {
    auto found = owner_.objects_.find(id);
    if (found == owner_.objects_.end() || found->second.state != State::kPending) continue;
    owner_.watchers_[id].push_back(&waiter_);
    ++waiter_.completions_needed;
  }
}

Owner::WatchScope::~WatchScope() {
  for (const auto& id : ids_) {
    auto found = owner_.watchers_.find(id);
    if (found == owner_.watchers_.end()) continue;
    auto& waiters = found->second;
    std::erase(waiters, &waiter_);
    if (waiters.empty()) owner_.watchers_.erase(found);
  }
}

template <typename Done>
bool Owner::WaitHelping(std::unique_lock<std::mutex>& lock,
                        std::chrono::steady_clock::time_point deadline, BlockedScope& blocked,
                        Done done) {
  while (!done()) {
    if (helper_) {
      lock.unlock();
      const bool ran = helper_();
      lock.lock();
      // Whatever completed while the lock was released notified nobody.
      if (ran || done()) continue;
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
    blocked.Announce();
    // A task arriving for the helper wakes this too (WakeWaiters).
    changed_.wait_until(lock, deadline);
  }
  return true;
}

void Owner::WaitForRoomLocked(std::unique_lock<std::mutex>& lock, BlockedScope& blocked) {
  const auto has_room = [this] {
    return max_tasks_in_flight_ == 0 || function_tasks_in_flight_ < max_tasks_in_flight_;
  };
  if (has_room()) return;
  if (!told_of_limit_) {
    told_of_limit_ = true;
    const std::string note = std::to_string(function_tasks_in_flight_) +
                             " tasks of this process are in flight, the most "
                             "max_tasks_in_flight allows: submitting more waits until some "
                             "finish (said once)";
    lock.unlock();  // a worker's log is a pipe, and the lock is the owner's
    Log(LogLevel::kInfo, note);
    lock.lock();
  }
  constexpr auto kWarnEvery = std::chrono::seconds(60);
  struct Waiting {
    std::size_t& count;
    explicit Waiting(std::size_t& waiting) : count(++waiting) {}
    ~Waiting() { --count; }
    Waiting(const Waiting&) = delete;
    Waiting& operator=(const Waiting&) = delete;
  } waiting(submitters_waiting_);
  const auto started = std::chrono::steady_clock::now();
  auto warn_at = started + kWarnEvery;
  // Woken (once per batch) when completions bring the count an eighth
  // below the limit; then submits while there is room.
  while (!WaitHelping(lock, warn_at, blocked, has_room)) {
    // Tasks that wait for something this process has yet to do (a signal it
    // sends after submitting them all) would wait forever: say so.
    const std::string warning =
        "submitting a task has waited " +
        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                           std::chrono::steady_clock::now() - started)
                           .count()) +
        " s for room: this process has " + std::to_string(function_tasks_in_flight_) +
        " tasks in flight and max_tasks_in_flight is " + std::to_string(max_tasks_in_flight_) +
        "; if they wait for something it has yet to do, raise the limit "
        "(--ray-cluster=max_tasks_in_flight=N, 0: none)";
    lock.unlock();
    Log(LogLevel::kWarning, warning);
    lock.lock();
    warn_at += kWarnEvery;
  }
}

std::vector<std::shared_ptr<const internal::ObjectValue>> Owner::Get(
    const std::vector<internal::ObjectId>& ids, internal::Timeout timeout) {
  const auto deadline = DeadlineAfter(timeout);
  Values values(ids.size());
  BlockedScope blocked(blocking_notifier_, blocked_depth_);
  if (std::all_of(ids.begin(), ids.end(), [this](const auto& id) { return Owns(id); })) {
    GetOwned(ids, nullptr, deadline, timeout, blocked, values);  // the common case: no copies
    return values;
  }
  std::vector<internal::ObjectId> owned;
  std::vector<std::size_t> owned_slots;
  std::vector<internal::ObjectId> borrowed;
  std::vector<std::size_t> borrowed_slots;
  owned.reserve(ids.size());
  owned_slots.reserve(ids.size());
  for (std::size_t index = 0; index < ids.size(); ++index) {
    if (Owns(ids[index])) {
      owned.push_back(ids[index]);
      owned_slots.push_back(index);
    } else {
      borrowed.push_back(ids[index]);
      borrowed_slots.push_back(index);
    }
  }
  if (!borrowed.empty()) GetBorrowed(borrowed, borrowed_slots, deadline, timeout, blocked, values);
  if (!owned.empty()) GetOwned(owned, &owned_slots, deadline, timeout, blocked, values);
  return values;
}

void Owner::GetOwned(const std::vector<internal::ObjectId>& ids,
                     const std::vector<std::size_t>* slots,
                     std::chrono::steady_clock::time_point deadline, internal::Timeout timeout,
                     BlockedScope& blocked, Values& values) {
  {
    // First until none is pending, with one wake-up for all of them; then
    // each is read in order below (that loop also recomputes lost ones).
    std::unique_lock lock(mutex_);
    Waiter waiter;
    WatchScope watch(*this, ids, waiter);
    if (!WaitHelping(lock, deadline, blocked, [&] { return waiter.completions_needed == 0; })) {
      for (const auto& id : ids) {
        auto found = objects_.find(id);
        if (found == objects_.end() || found->second.state != State::kPending) continue;
        throw GetTimeoutError(GetTimeoutMessage(*timeout, id, found->second.producer));
      }
    }
  }
  // Then each is read in order; a copy found lost has its rebuild started
  // and is read in the next pass, so the rebuilds of several lost objects
  // run at once instead of one after the other.
  const auto read = [&](std::size_t index) {
    return ReadOwned(ids[index], deadline, timeout, blocked,
                     values[slots != nullptr ? (*slots)[index] : index]);
  };
  // The first pass needs no list of indexes (every Get of an owned object
  // comes here); only lost copies make one.
  std::vector<std::size_t> rebuilding;
  for (std::size_t index = 0; index < ids.size(); ++index) {
    if (!read(index)) rebuilding.push_back(index);
  }
  while (!rebuilding.empty()) {
    std::vector<std::size_t> again;
    for (const std::size_t index : rebuilding) {
      if (!read(index)) again.push_back(index);
    }
    rebuilding = std::move(again);
  }
}

bool Owner::ReadOwned(const internal::ObjectId& id, std::chrono::steady_clock::time_point deadline,
                      internal::Timeout timeout, BlockedScope& blocked,
                      std::shared_ptr<const internal::ObjectValue>& value) {
  std::unique_lock lock(mutex_);
  const std::vector<internal::ObjectId> this_one{id};
  Waiter waiter;
  // Ended while the lock is held: its destructor edits watchers_, and the
  // paths below unlock before they return or throw.
  std::optional<WatchScope> watch(std::in_place, *this, this_one, waiter);
  if (!WaitHelping(lock, deadline, blocked, [&] { return waiter.completions_needed == 0; })) {
    const auto& entry = objects_.at(id);
    throw GetTimeoutError(GetTimeoutMessage(*timeout, id, entry.producer));
  }
  watch.reset();
  auto found = objects_.find(id);
  if (found == objects_.end()) {
    throw ObjectLostError("sray: object " + id.ToString() +
                          " is unknown to this process: its references were all dropped");
  }
  const ObjectEntry& entry = found->second;
  if (entry.state == State::kFailed) {
    const std::shared_ptr<const TaskOutcome> failure = entry.failure;
    lock.unlock();
    ThrowFailure(*failure);
  }
  if (!entry.in_store) {
    value = std::make_shared<InlineValue>(entry.inline_value);
    return true;
  }
  const std::uint32_t node = entry.node;
  const std::uint64_t size = entry.size;
  const std::uint16_t rebuilds = entry.rebuilds;
  const std::string why_not = WhyNotRecomputedLocked(id, entry);
  lock.unlock();
  std::string why_lost;
  value = ReadStored(id, node, size, why_lost);
  if (value) return true;
  if (!Reconstruct(id, node, rebuilds)) {
    throw ObjectLostError("sray: object " + id.ToString() + " is lost: node " +
                          std::to_string(node) + " no longer has it (" + why_lost +
                          "), and it cannot be recomputed: " + why_not);
  }
  return false;
}

void Owner::GetBorrowed(const std::vector<internal::ObjectId>& ids,
                        const std::vector<std::size_t>& slots,
                        std::chrono::steady_clock::time_point deadline, internal::Timeout timeout,
                        BlockedScope& blocked, Values& values) {
  const auto answers = AskOwners(ids);
  const StopAskingOwners stop_asking(borrowed_.get(), ids, answers);
  {
    std::unique_lock lock(mutex_);
    if (!WaitHelping(lock, deadline, blocked, [&] { return answers->arrived == ids.size(); })) {
      std::lock_guard answers_lock(answers->mutex);
      for (std::size_t index = 0; index < ids.size(); ++index) {
        if (answers->answers[index]) continue;
        throw GetTimeoutError("sray: Get timed out after " + std::to_string(timeout->count()) +
                              " ms: object " + ids[index].ToString() + " (owned by rank " +
                              std::to_string(ids[index].owner) +
                              ") is not ready yet: wait longer, or check with Wait first");
      }
    }
  }
  std::vector<Result<ObjectStatus>> latest;
  latest.reserve(ids.size());
  {
    std::lock_guard answers_lock(answers->mutex);
    for (auto& answer : answers->answers) latest.push_back(std::move(*answer));
  }
  // A copy found gone is rebuilt by its owner (from its lineage; only the
  // owner keeps it), which answers where the new copy is: as an owner's own
  // Get does, a few times over, since the new copy can be lost in turn. All
  // the lost copies of a pass are asked for at once, so their rebuilds run
  // side by side.
  std::vector<std::size_t> unread(ids.size());
  std::iota(unread.begin(), unread.end(), std::size_t{0});
  for (int rebuilds_asked = 0; !unread.empty(); ++rebuilds_asked) {
    std::vector<std::size_t> lost;
    for (const std::size_t index : unread) {
      if (!ReadBorrowed(ids[index], latest[index], rebuilds_asked, values[slots[index]])) {
        lost.push_back(index);
      }
    }
    if (!lost.empty()) AskOwnersToRebuild(ids, lost, latest, deadline, timeout, blocked);
    unread = std::move(lost);
  }
}

bool Owner::IsFinalFailure(const Result<ObjectStatus>& answer) {
  if (!answer.ok()) return true;
  const auto kind = static_cast<ObjectStatusKind>(answer->kind);
  return kind != ObjectStatusKind::kInline && kind != ObjectStatusKind::kStored;
}

bool Owner::ReadBorrowed(const internal::ObjectId& id, const Result<ObjectStatus>& answer,
                         int rebuilds_asked, std::shared_ptr<const internal::ObjectValue>& value) {
  if (!answer.ok()) {
    throw ObjectLostError("sray: object " + id.ToString() + " is lost: its owner (rank " +
                          std::to_string(id.owner) +
                          ") did not answer: " + answer.status().message() +
                          ": an object lives only as long as the process that created it");
  }
  const auto kind = static_cast<ObjectStatusKind>(answer->kind);
  if (kind == ObjectStatusKind::kInline) {
    value = std::make_shared<InlineValue>(answer->value);
    return true;
  }
  if (kind == ObjectStatusKind::kFailed) ThrowFailure(answer->failure);
  if (kind != ObjectStatusKind::kStored) {
    throw ObjectLostError("sray: object " + id.ToString() + " is unknown to its owner (rank " +
                          std::to_string(id.owner) +
                          (rebuilds_asked == 0
                               ? "): it was freed before this reference reached this process"
                               : "), which was asked to rebuild a lost copy of it"));
  }
  std::string why_lost;
  value = ReadStored(id, answer->node, answer->size, why_lost);
  if (value) return true;
  if (rebuilds_asked == kBorrowedRebuildsAsked) {
    throw ObjectLostError("sray: object " + id.ToString() + " is lost: node " +
                          std::to_string(answer->node) + " no longer has it (" + why_lost +
                          "), and it was lost again each of the " +
                          std::to_string(kBorrowedRebuildsAsked) + " times its owner (rank " +
                          std::to_string(id.owner) + ") rebuilt it");
  }
  return false;
}

std::shared_ptr<const internal::ObjectValue> Owner::ReadStored(const internal::ObjectId& id,
                                                               std::uint32_t node,
                                                               std::uint64_t size,
                                                               std::string& why_lost) {
  Status last = Status::Ok();
  // The store may spill the object between MakeLocal and the open; ask again.
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto path = store_.MakeLocal(id, node, size);
    if (!path.ok()) {
      last = path.status();
      break;
    }
    auto file = object::MappedFile::OpenReadOnly(*path);
    if (file.ok()) return std::make_shared<MappedValue>(std::move(file).value());
    last = file.status();
  }
  if (last.code() == StatusCode::kNotFound) {
    why_lost = last.message();
    return nullptr;
  }
  const std::string message = "sray: cannot read object " + id.ToString() + " of node " +
                              std::to_string(node) + ": " + last.message();
  if (last.code() == StatusCode::kResourceExhausted) throw ObjectStoreFullError(message);
  throw Error(message);
}

std::vector<bool> Owner::Wait(const std::vector<internal::ObjectId>& ids, std::size_t num_ready,
                              internal::Timeout timeout) {
  const auto deadline = DeadlineAfter(timeout);
  const std::size_t wanted = std::min(num_ready, ids.size());
  std::vector<bool> ready(ids.size(), false);
  // Borrowed ids are ready once their owners answer.
  std::vector<internal::ObjectId> borrowed;
  std::vector<std::size_t> borrowed_slots;
  for (std::size_t index = 0; index < ids.size(); ++index) {
    if (Owns(ids[index])) continue;
    borrowed.push_back(ids[index]);
    borrowed_slots.push_back(index);
  }
  std::shared_ptr<OwnerAnswers> answers;
  if (!borrowed.empty()) answers = AskOwners(borrowed);
  const StopAskingOwners stop_asking(borrowed_.get(), borrowed, answers);
  BlockedScope blocked(blocking_notifier_, blocked_depth_);
  std::unique_lock lock(mutex_);
  auto count_ready = [&] {
    std::size_t count = 0;
    for (std::size_t index = 0; index < ids.size(); ++index) {
      if (!Owns(ids[index])) continue;
      auto found = objects_.find(ids[index]);
      ready[index] = found == objects_.end() || found->second.state != State::kPending;
      if (ready[index]) ++count;
    }
    if (answers) {
      std::lock_guard answers_lock(answers->mutex);
      for (std::size_t index = 0; index < borrowed.size(); ++index) {
        ready[borrowed_slots[index]] = answers->answers[index].has_value();
        if (ready[borrowed_slots[index]]) ++count;
      }
    }
    return count;
  };
  while (true) {
    const std::size_t count = count_ready();
    if (count >= wanted) return ready;
    const std::size_t arrived = answers ? answers->arrived.load() : 0;
    Waiter waiter;
    WatchScope watch(*this, ids, waiter);
    waiter.completions_needed = wanted - count;
    const bool done = WaitHelping(lock, deadline, blocked, [&] {
      return waiter.completions_needed == 0 || (answers && answers->arrived != arrived);
    });
    if (!done) {
      count_ready();
      return ready;
    }
  }
}

}  // namespace sray::core
