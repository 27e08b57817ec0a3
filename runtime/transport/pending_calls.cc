#include "transport/pending_calls.h"

namespace sray::transport {

void PendingCall::MarkSent(const Status& status) {
  std::unique_lock lock(mutex_);
  sent_ = true;
  send_request_ = nullptr;
  if (!status.ok() && !outcome_) outcome_ = status;
  MaybeFinish(lock);
}

void PendingCall::Complete(Result<Bytes> result) {
  std::unique_lock lock(mutex_);
  if (!outcome_) outcome_ = std::move(result);
  MaybeFinish(lock);
}

bool PendingCall::SetSendRequest(void* request) {
  std::lock_guard lock(mutex_);
  if (!sent_) send_request_ = request;
  return outcome_.has_value() && !outcome_->ok();
}

void PendingCall::CancelSend(const std::function<void(void* request)>& cancel) {
  std::lock_guard lock(mutex_);
  if (!sent_ && send_request_ != nullptr) cancel(send_request_);
}

bool PendingCall::sent() const {
  std::lock_guard lock(mutex_);
  return sent_;
}

bool PendingCall::has_outcome() const {
  std::lock_guard lock(mutex_);
  return outcome_.has_value();
}

void PendingCall::MaybeFinish(std::unique_lock<std::recursive_mutex>& lock) {
  if (finished_ || !sent_ || !outcome_) return;
  finished_ = true;
  auto done = std::move(on_done_);
  auto result = std::move(*outcome_);
  lock.unlock();
  if (done) done(std::move(result));
}

void PendingCalls::Add(std::shared_ptr<PendingCall> call) {
  std::lock_guard lock(mutex_);
  ids_by_rank_[call->rank()].insert(call->id());
  by_id_.emplace(call->id(), std::move(call));
}

std::shared_ptr<PendingCall> PendingCalls::Take(std::uint64_t id) {
  std::lock_guard lock(mutex_);
  auto found = by_id_.find(id);
  if (found == by_id_.end()) return nullptr;
  return TakeLocked(found);
}

std::shared_ptr<PendingCall> PendingCalls::TakeLocked(
    std::unordered_map<std::uint64_t, std::shared_ptr<PendingCall>>::iterator found) {
  const std::uint64_t id = found->first;
  std::shared_ptr<PendingCall> call = std::move(found->second);
  by_id_.erase(found);
  // An emptied set stays: the next call to that peer reuses it, sparing
  // an allocation of its buckets per call.
  ids_by_rank_[call->rank()].erase(id);
  return call;
}

std::vector<std::shared_ptr<PendingCall>> PendingCalls::TakeCallsTo(std::uint32_t rank) {
  std::vector<std::shared_ptr<PendingCall>> taken;
  std::lock_guard lock(mutex_);
  auto ids = ids_by_rank_.find(rank);
  if (ids == ids_by_rank_.end()) return taken;
  taken.reserve(ids->second.size());
  for (const std::uint64_t id : ids->second) {
    auto found = by_id_.find(id);
    taken.push_back(std::move(found->second));
    by_id_.erase(found);
  }
  ids->second.clear();
  return taken;
}

std::vector<std::shared_ptr<PendingCall>> PendingCalls::TakeAll() {
  std::vector<std::shared_ptr<PendingCall>> taken;
  std::lock_guard lock(mutex_);
  taken.reserve(by_id_.size());
  for (auto& [id, call] : by_id_) taken.push_back(std::move(call));
  by_id_.clear();
  ids_by_rank_.clear();
  return taken;
}

std::vector<std::uint32_t> PendingCalls::AwaitedRanks() const {
  std::vector<std::uint32_t> ranks;
  std::lock_guard lock(mutex_);
  ranks.reserve(ids_by_rank_.size());
  for (const auto& [rank, ids] : ids_by_rank_) {
    if (!ids.empty()) ranks.push_back(rank);
  }
  return ranks;
}

std::size_t PendingCalls::size() const {
  std::lock_guard lock(mutex_);
  return by_id_.size();
}

void PendingCalls::Complete(std::uint64_t id, Result<Bytes> result) {
  if (auto call = Take(id)) call->Complete(std::move(result));
}

bool PendingCalls::CompleteReplyFrom(std::uint32_t rank, std::uint64_t id, Result<Bytes> result) {
  std::shared_ptr<PendingCall> call;
  {
    std::lock_guard lock(mutex_);
    auto found = by_id_.find(id);
    if (found == by_id_.end() || found->second->rank() != rank) return false;
    call = TakeLocked(found);
  }
  call->Complete(std::move(result));
  return true;
}

void PendingCalls::FailCallsTo(std::uint32_t rank, const Status& failure) {
  for (auto& call : TakeCallsTo(rank)) call->Complete(failure);
}

}  // namespace sray::transport
