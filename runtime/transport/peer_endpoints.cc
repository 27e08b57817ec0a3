#include "transport/peer_endpoints.h"

#include <chrono>

#include "transport/progress_loop.h"

namespace sray::transport {
namespace {

// How long closing endpoints at shutdown waits for them to flush.
constexpr std::chrono::seconds kCloseFlushTime{2};

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

Result<ucp_ep_h> PeerEndpoints::For(std::uint32_t rank) {
  {
    std::lock_guard lock(mutex_);
    if (const Status* fence = FenceOfLocked(rank)) return *fence;
    auto found = by_rank_.find(rank);
    if (found != by_rank_.end()) {
      if (!found->second.failure.ok()) return found->second.failure;
      return found->second.endpoint->handle();
    }
  }
  if (!peers_.resolve_address) {
    return Status::NotFound("no address resolver: cannot reach " + peers_.describe(rank));
  }
  // Resolution and connecting run without the lock; a racing thread's
  // endpoint wins and ours is closed later (CloseUnused).
  auto address = peers_.resolve_address(rank);
  if (!address.ok()) {
    return address.status().WithContext("cannot reach " + peers_.describe(rank));
  }
  auto endpoint = UcxEndpoint::Connect(
      worker_, *address, peers_.describe(rank),
      [this, rank](ucp_ep_h handle, ucs_status_t status) { OnEndpointError(rank, handle, status); },
      peers_.long_operations);
  if (!endpoint.ok()) {
    // Connecting to a process that already died fails here (on shared
    // memory: "Shared memory error"); say so the way every peer death is said.
    if (peers_.alive && !peers_.alive(rank)) {
      return PeerFailure(rank, "its process is gone; " + endpoint.status().message());
    }
    return endpoint.status();
  }
  std::lock_guard lock(mutex_);
  auto [entry, inserted] = by_rank_.try_emplace(rank);
  if (!inserted) {
    unused_.push_back(std::move(endpoint).value());
    unused_waiting_.store(true);
    if (!entry->second.failure.ok()) return entry->second.failure;
    return entry->second.endpoint->handle();
  }
  entry->second.endpoint = std::move(endpoint).value();
  return entry->second.endpoint->handle();
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
  if (found != by_rank_.end() && found->second.failure.ok()) found->second.failure = failure;
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
    if (found != by_rank_.end() && found->second.endpoint->handle() == endpoint) {
      found->second.failure = failure;
    }
  }
  if (peers_.on_failure) peers_.on_failure(rank, failure);
}

void PeerEndpoints::CloseUnused() {
  // Called from the progress thread's polling loop (housekeeping): a plain
  // load first, since an exchange writes the cache line each time (3% of a
  // small call's samples, perf).
  if (!unused_waiting_.load(std::memory_order_relaxed) || !unused_waiting_.exchange(false)) return;
  std::vector<std::unique_ptr<UcxEndpoint>> unused;
  {
    std::lock_guard lock(mutex_);
    unused.swap(unused_);
  }
  unused.clear();  // each closes forcibly
}

bool PeerEndpoints::CloseAll() {
  std::vector<std::unique_ptr<UcxEndpoint>> endpoints;
  std::vector<bool> failed;
  {
    std::lock_guard lock(mutex_);
    for (auto& [rank, peer] : by_rank_) {
      endpoints.push_back(std::move(peer.endpoint));
      // A fenced peer may be frozen: a flush would wait for it in vain.
      failed.push_back(!peer.failure.ok() || FenceOfLocked(rank) != nullptr);
    }
    by_rank_.clear();
    for (auto& endpoint : unused_) {
      endpoints.push_back(std::move(endpoint));
      failed.push_back(false);
    }
    unused_.clear();
  }
  return UcxEndpoint::CloseAll(std::move(endpoints), failed, kCloseFlushTime);
}

}  // namespace sray::transport
