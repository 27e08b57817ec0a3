#pragma once

// The requests a transport sent and awaits a reply for.
//
// A call completes once both its send has finished (UCX no longer reads the
// payload, which the caller owns) and its outcome is known (the reply, an
// error reply, the peer's death, a timeout); `on_done` then runs once, on
// whichever thread did the second of the two.
//
// PendingCalls indexes calls by id (a reply names its request) and by peer
// rank, so failing a dead peer's calls touches only those calls.
//
// Thread-safety: every member of both classes may be used from any thread,
// including UCX callbacks; `on_done` runs without any lock held.

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/status.h"
#include "transport/bytes.h"
#include "transport/frame.h"

namespace sray::transport {

class PendingCall {
 public:
  PendingCall(std::uint64_t id, std::uint32_t rank, EncodedFrameHeader header,
              std::function<void(Result<Bytes>)> on_done)
      : id_(id), rank_(rank), header_(header), on_done_(std::move(on_done)) {}
  PendingCall(const PendingCall&) = delete;
  PendingCall& operator=(const PendingCall&) = delete;

  [[nodiscard]] std::uint64_t id() const { return id_; }
  [[nodiscard]] std::uint32_t rank() const { return rank_; }
  [[nodiscard]] const EncodedFrameHeader& header() const { return header_; }

  // The send is over: UCX completed it, failed it (`status`), or never had
  // it. A failed send is the call's outcome unless one came first.
  void MarkSent(const Status& status);
  // Records the outcome; later outcomes are ignored.
  void Complete(Result<Bytes> result);
  // While the send is in flight, the UCX request that carries it (so a
  // timed-out call can cancel it). Ignored once the send is over. Returns
  // whether the call failed already (a timeout, a dead peer): a caller that
  // timed out before the request was recorded could not cancel it, so the
  // sender must. A reply that came first needs nothing cancelled.
  [[nodiscard]] bool SetSendRequest(void* request);
  // Calls `cancel` with the send's request if it is still in flight, under
  // the call's lock (cancelling may run the send callback on this thread).
  void CancelSend(const std::function<void(void* request)>& cancel);
  [[nodiscard]] bool sent() const;
  // Whether the outcome is known (a reply, a failure, a timeout): a call
  // handed to the progress thread is then not sent at all.
  [[nodiscard]] bool has_outcome() const;

 private:
  void MaybeFinish(std::unique_lock<std::recursive_mutex>& lock);

  const std::uint64_t id_;
  const std::uint32_t rank_;
  const EncodedFrameHeader header_;
  // Recursive: cancelling a send under the lock may run its callback, which
  // marks the call sent, on this thread.
  mutable std::recursive_mutex mutex_;
  std::function<void(Result<Bytes>)> on_done_;  // guarded by mutex_; moved out to run
  bool sent_ = false;                           // guarded by mutex_
  void* send_request_ = nullptr;                // guarded by mutex_; valid while !sent_
  bool finished_ = false;                       // guarded by mutex_
  std::optional<Result<Bytes>> outcome_;        // guarded by mutex_
};

class PendingCalls {
 public:
  void Add(std::shared_ptr<PendingCall> call);
  // Removes and returns call `id`; null when it completed or failed already.
  std::shared_ptr<PendingCall> Take(std::uint64_t id);
  // Removes and returns every call to `rank`.
  std::vector<std::shared_ptr<PendingCall>> TakeCallsTo(std::uint32_t rank);
  std::vector<std::shared_ptr<PendingCall>> TakeAll();
  // The ranks that calls wait for, each once.
  [[nodiscard]] std::vector<std::uint32_t> AwaitedRanks() const;
  [[nodiscard]] std::size_t size() const;

  // Take(id), then Complete(result) on it when it was still pending.
  void Complete(std::uint64_t id, Result<Bytes> result);
  // A reply from `rank`: completes call `id` only if that call went to
  // `rank`. A reply naming another rank's call (a stray frame, or another
  // process of the job answering what it was not asked) leaves the call
  // waiting for its callee; false then, and when no such call waits.
  bool CompleteReplyFrom(std::uint32_t rank, std::uint64_t id, Result<Bytes> result);
  // TakeCallsTo(rank), then Complete(failure) on each.
  void FailCallsTo(std::uint32_t rank, const Status& failure);

 private:
  // Removes the call `found` points at from both indexes; mutex_ held.
  std::shared_ptr<PendingCall> TakeLocked(
      std::unordered_map<std::uint64_t, std::shared_ptr<PendingCall>>::iterator found);

  mutable std::mutex mutex_;
  std::unordered_map<std::uint64_t, std::shared_ptr<PendingCall>> by_id_;  // guarded by mutex_
  std::unordered_map<std::uint32_t, std::unordered_set<std::uint64_t>> ids_by_rank_;  // guarded
};

}  // namespace sray::transport
