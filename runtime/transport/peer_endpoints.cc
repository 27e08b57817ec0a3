#include "transport/peer_endpoints.h"

#include <chrono>
#include <thread>

#include "transport/progress_loop.h"

namespace sray::transport {
namespace {

// How long closing endpoints at shutdown waits for them to flush.
constexpr std::chrono::seconds kCloseFlushTime{2};
// How long closing endpoints at shutdown waits for leases still held.
constexpr std::chrono::milliseconds kLeaseReturnWait{200};

}  // namespace

PeerEndpoints::PeerEndpoints(std::shared_ptr<UcxWorker> worker, Peers peers)
    : worker_(std::move(worker)), peers_(std::move(peers)) {}

PeerEndpoints::~PeerEndpoints() {
  CloseAll();
}

Status PeerEndpoints::PeerFailure(std::uint32_t rank, std::string_view cause) const {
  return Status::Unavailable(peers_.describe(rank) + " is unreachable (" + std::string(cause) +
                             "): the process died or its node failed");
}

Result<std::shared_ptr<UcxEndpoint>> PeerEndpoints::For(std::uint32_t rank) {
  {
    std::lock_guard lock(mutex_);
    if (closing_all_) return ClosedError(rank);
    if (const Status* fence = FenceOfLocked(rank)) return *fence;
    auto found = by_rank_.find(rank);
    if (found != by_rank_.end()) {
      if (!found->second.failure.ok()) return found->second.failure;
      if (!found->second.endpoint) return ClosedError(rank);
      return found->second.endpoint;
    }
  }
  if (!peers_.resolve_address) {
    return Status::NotFound("no address resolver: cannot reach " + peers_.describe(rank));
  }
  // Resolution and connecting run without the lock; a racing thread's
  // endpoint wins and ours is closed later (CloseRetired).
  auto address = peers_.resolve_address(rank);
  if (!address.ok()) {
    return address.status().WithContext("cannot reach " + peers_.describe(rank));
  }
  auto connected = UcxEndpoint::Connect(
      worker_, *address, peers_.describe(rank),
      [this, rank](ucp_ep_h handle, ucs_status_t status) { OnEndpointError(rank, handle, status); },
      peers_.long_operations);
  if (!connected.ok()) {
    // Connecting to a process that already died fails here (on shared
    // memory: "Shared memory error"); say so the way every peer death is said.
    if (peers_.alive && !peers_.alive(rank)) {
      return PeerFailure(rank, "its process is gone; " + connected.status().message());
    }
    return connected.status();
  }
  std::shared_ptr<UcxEndpoint> endpoint = std::move(connected).value();
  if (peers_.after_connect) peers_.after_connect();
  std::lock_guard lock(mutex_);
  if (closing_all_) {
    spare_.push_back(std::move(endpoint));  // CloseAll took the others already
    return ClosedError(rank);
  }
  auto [entry, inserted] = by_rank_.try_emplace(rank);
  if (!inserted) {
    spare_.push_back(std::move(endpoint));
    if (!entry->second.failure.ok()) return entry->second.failure;
    if (const Status* fence = FenceOfLocked(rank)) return *fence;
    if (!entry->second.endpoint) return ClosedError(rank);
    return entry->second.endpoint;
  }
  entry->second.endpoint = std::move(endpoint);
  // UCX may have reported the endpoint failed before it was recorded here:
  // its error callback found no such endpoint, and recorded nothing. The
  // endpoint keeps the failure for this moment (set before that callback
  // took mutex_, so one of the two sees the other).
  if (const ucs_status_t failed = entry->second.endpoint->failure(); failed != UCS_OK) {
    entry->second.failure = PeerFailure(rank, ucs_status_string(failed));
    any_failed_.store(true);
    late_failures_.push_back({.rank = rank, .failure = entry->second.failure});
    RetireLocked(rank, entry->second);
    return entry->second.failure;
  }
  if (const Status* fence = FenceOfLocked(rank)) {
    RetireLocked(rank, entry->second);
    return *fence;
  }
  return entry->second.endpoint;
}

void PeerEndpoints::RetireLocked(std::uint32_t rank, Peer& peer) {
  if (!peer.endpoint) return;
  retired_.push_back({.rank = rank, .endpoint = std::move(peer.endpoint)});
  peer.endpoint.reset();
  retired_waiting_.store(true);
}

void PeerEndpoints::Retire(std::uint32_t rank, const Status& failure) {
  std::lock_guard lock(mutex_);
  auto found = by_rank_.find(rank);
  if (found == by_rank_.end()) return;
  if (found->second.failure.ok()) found->second.failure = failure;
  RetireLocked(rank, found->second);
}

Status PeerEndpoints::ClosedError(std::uint32_t rank) const {
  return Status::Unavailable("cannot reach " + peers_.describe(rank) +
                             ": this process's endpoint to it was closed (its transport stops)");
}

Status PeerEndpoints::FailureOf(std::uint32_t rank) {
  std::lock_guard lock(mutex_);
  if (const Status* fence = FenceOfLocked(rank)) return *fence;
  auto found = by_rank_.find(rank);
  return found == by_rank_.end() ? Status::Ok() : found->second.failure;
}

const Status* PeerEndpoints::FenceOfLocked(std::uint32_t rank) const {
  if (!any_fenced_.load()) return nullptr;
  for (const FencedRanks& fenced : fenced_) {
    if (rank >= fenced.first && rank <= fenced.last) return &fenced.cause;
  }
  return nullptr;
}

void PeerEndpoints::Fence(std::uint32_t first, std::uint32_t last, const Status& cause) {
  std::lock_guard lock(mutex_);
  if (FenceOfLocked(first) != nullptr && FenceOfLocked(last) != nullptr) return;
  fenced_.push_back(FencedRanks{.first = first, .last = last, .cause = cause});
  any_fenced_.store(true);
  // Their endpoints stay open: a fenced process that asks is answered,
  // and learns that it is out of the job (CloseIfFailed closes one).
}

void PeerEndpoints::CloseIfFailed(std::uint32_t rank) {
  std::lock_guard lock(mutex_);
  auto found = by_rank_.find(rank);
  if (found == by_rank_.end()) return;
  if (found->second.failure.ok() && FenceOfLocked(rank) == nullptr) return;
  RetireLocked(rank, found->second);
}

Status PeerEndpoints::FenceOf(std::uint32_t rank) const {
  if (!any_fenced_.load()) return Status::Ok();
  std::lock_guard lock(mutex_);
  const Status* fence = FenceOfLocked(rank);
  return fence == nullptr ? Status::Ok() : *fence;
}

void PeerEndpoints::MarkFailed(std::uint32_t rank, const Status& failure) {
  std::lock_guard lock(mutex_);
  auto found = by_rank_.find(rank);
  if (found != by_rank_.end() && found->second.failure.ok()) {
    found->second.failure = failure;
    RetireLocked(rank, found->second);
  }
}

bool PeerEndpoints::HasFailed(std::uint32_t rank) const {
  std::lock_guard lock(mutex_);
  if (FenceOfLocked(rank) != nullptr) return true;
  auto found = by_rank_.find(rank);
  return found != by_rank_.end() && !found->second.failure.ok();
}

void PeerEndpoints::OnEndpointError(std::uint32_t rank, ucp_ep_h endpoint, ucs_status_t status) {
  // Inside UCX's error callback: what runs from here (failed calls'
  // completions) must not block on the transport.
  CallbackScope scope;
  any_failed_.store(true);
  const Status failure = PeerFailure(rank, ucs_status_string(status));
  {
    std::lock_guard lock(mutex_);
    auto found = by_rank_.find(rank);
    // An endpoint that lost the race to connect says nothing about the one
    // in use.
    if (found != by_rank_.end() && found->second.endpoint &&
        found->second.endpoint->handle() == endpoint) {
      if (found->second.failure.ok()) found->second.failure = failure;
      RetireLocked(rank, found->second);
    }
  }
  if (peers_.on_failure) peers_.on_failure(rank, failure);
}

void PeerEndpoints::CloseRetired() {
  // Called from the progress thread's polling loop (housekeeping): a plain
  // load first, since an exchange writes the cache line each time (3% of a
  // small call's samples, perf).
  if (!retired_waiting_.load(std::memory_order_relaxed) || !retired_waiting_.exchange(false)) {
    return;
  }
  std::vector<std::shared_ptr<UcxEndpoint>> unleased;
  std::vector<std::uint32_t> closing_ranks;
  std::vector<LateFailure> late;
  {
    std::lock_guard lock(mutex_);
    late.swap(late_failures_);
    // Out of the table, a retired endpoint gains no lease: a count of one
    // (ours) stays one.
    std::erase_if(retired_, [&](Retired& retired) {
      if (retired.endpoint.use_count() != 1) return false;
      closing_ranks.push_back(retired.rank);
      unleased.push_back(std::move(retired.endpoint));
      return true;
    });
    if (!retired_.empty()) retired_waiting_.store(true);  // leased still: later
  }
  // The count was read relaxed: what the last lease's holder did with the
  // endpoint happens before its close (the release of its count).
  std::atomic_thread_fence(std::memory_order_acquire);
  if (!closing_ranks.empty()) {
    // Replies on a reply endpoint under way finish before; later ones to
    // these ranks are dropped.
    std::unique_lock closing(closing_mutex_);
    closed_ranks_.insert(closing_ranks.begin(), closing_ranks.end());
    any_closed_.store(true, std::memory_order_relaxed);
  }
  closed_for_failures_.fetch_add(unleased.size());
  if (peers_.on_failure) {
    CallbackScope scope;  // as from UCX's error callback: nothing may block
    for (const LateFailure& failure : late) peers_.on_failure(failure.rank, failure.failure);
  }
  unleased.clear();  // each closes by force, ending its requests in flight
}

bool PeerEndpoints::CloseAll() {
  std::vector<std::shared_ptr<UcxEndpoint>> endpoints;
  std::vector<bool> failed;
  {
    std::lock_guard lock(mutex_);
    closing_all_ = true;
    for (auto& [rank, peer] : by_rank_) {
      if (!peer.endpoint) continue;  // retired
      endpoints.push_back(std::move(peer.endpoint));
      // A fenced peer may be frozen: a flush would wait for it in vain.
      failed.push_back(!peer.failure.ok() || FenceOfLocked(rank) != nullptr);
    }
    by_rank_.clear();
    for (auto& retired : retired_) {
      endpoints.push_back(std::move(retired.endpoint));
      failed.push_back(true);  // failed or fenced peers'
    }
    retired_.clear();
    for (auto& spare : spare_) {
      endpoints.push_back(std::move(spare));
      failed.push_back(false);
    }
    spare_.clear();
    late_failures_.clear();
  }
  {
    std::unique_lock closing(closing_mutex_);
    all_closed_ = true;
    any_closed_.store(true, std::memory_order_relaxed);
  }
  // A thread that took a lease before may still be starting an operation
  // with it (For refuses new ones now): a moment for it to finish.
  const auto deadline = std::chrono::steady_clock::now() + kLeaseReturnWait;
  for (const auto& endpoint : endpoints) {
    while (endpoint.use_count() > 1 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  return UcxEndpoint::CloseAll(std::move(endpoints), failed, kCloseFlushTime);
}

}  // namespace sray::transport
