#pragma once

// A transport's endpoints: one per peer rank, connected on first use from
// the address the resolver returns, with the peer's failure recorded beside
// it once known (from UCX's error callback or the liveness probe), or the
// cause it was fenced off with.
//
// Lifetime: For hands out a shared reference (a lease) that its user holds
// while it starts an operation on the endpoint. Once the peer's failure is
// recorded (or CloseIfFailed is asked of a fenced peer's), the endpoint
// leaves the table (retired): no new lease is given, and CloseRetired
// closes it by force once the last lease is back. A forced close ends the
// endpoint's requests still in flight (a send to a peer that stopped
// reading: UCX 1.13 cancels no send), so what they read or write is the
// caller's again.
//
// Thread-safety: every member may be called from any thread, except
// CloseRetired and CloseAll, which progress the worker (never inside a UCX
// callback). `on_failure` runs inside UCX's error callback, or on the
// thread that calls CloseRetired for a failure recorded late.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "common/status.h"
#include "transport/bytes.h"
#include "transport/long_operations.h"
#include "transport/ucx_handles.h"

namespace sray::transport {

class PeerEndpoints {
 public:
  struct Peers {
    std::function<Result<Bytes>(std::uint32_t rank)> resolve_address;  // may be empty
    std::function<bool(std::uint32_t rank)> alive;                     // may be empty
    std::function<std::string(std::uint32_t rank)> describe;
    // A peer was found dead by UCX: fail what waits for it.
    std::function<void(std::uint32_t rank, const Status& failure)> on_failure;
    // Counts each endpoint's creation; may be null. Must outlive this.
    LongOperations* long_operations = nullptr;
    // Tests only: runs between a connect and its endpoint's recording.
    std::function<void()> after_connect;
  };

  PeerEndpoints(std::shared_ptr<UcxWorker> worker, Peers peers);
  ~PeerEndpoints();
  PeerEndpoints(const PeerEndpoints&) = delete;
  PeerEndpoints& operator=(const PeerEndpoints&) = delete;

  // The endpoint to `rank`, connecting first if needed; the peer's failure
  // once it is known. Resolving may block (a PMIx lookup). Hold the lease
  // only while starting operations on it: a failed peer's endpoint is
  // closed once no lease is held.
  Result<std::shared_ptr<UcxEndpoint>> For(std::uint32_t rank);
  // Ok while no failure of `rank` is known.
  Status FailureOf(std::uint32_t rank);
  // Records that `rank`'s process is gone (the first failure recorded wins).
  void MarkFailed(std::uint32_t rank, const Status& failure);
  // Whether `rank`'s endpoint in use failed (or the rank was marked failed).
  [[nodiscard]] bool HasFailed(std::uint32_t rank) const;
  // Fences ranks `first` to `last` off for good: from now on they count as
  // failed with `cause` (For refuses them, FailureOf and HasFailed say so),
  // although their processes may live on (a node the head declared lost,
  // which must not act in the job any more).
  void Fence(std::uint32_t first, std::uint32_t last, const Status& cause);
  // Closes `rank`'s endpoint (with CloseRetired, once no lease holds it)
  // when its peer failed or was fenced off: for a caller whose request to
  // it can end no other way (UCX 1.13 cancels no send), though a fenced
  // peer that asks is then no longer told why.
  void CloseIfFailed(std::uint32_t rank);
  // The cause `rank` was fenced off with; ok when it was not.
  [[nodiscard]] Status FenceOf(std::uint32_t rank) const;
  // One wording for every way a peer is found dead, so callers and tests
  // can rely on it.
  [[nodiscard]] Status PeerFailure(std::uint32_t rank, std::string_view cause) const;

  // Closes, by force, the retired endpoints (failed or fenced peers') no
  // lease holds any more, and reports failures recorded after UCX's error
  // callback had run (`on_failure`; a failure may so be reported twice).
  // The progress thread calls it in its housekeeping; a caller waiting for
  // a request to a failed peer to end may too.
  void CloseRetired();
  // Marks `rank` failed with `failure` (unless it failed already) and
  // retires its endpoint: for a caller whose request to it must end while
  // the transport stops.
  void Retire(std::uint32_t rank, const Status& failure);
  // Closes everything, letting peers see an orderly disconnect for a moment;
  // false when some close did not finish. For refuses every rank from then
  // on, replies are dropped, and leases still held are waited for briefly.
  bool CloseAll();
  // Runs `send`, which sends on a reply endpoint UCX gave for a request
  // from `rank`, unless an endpoint to `rank` was closed by force: UCX
  // matches the endpoints two processes make to each other, so the reply
  // endpoint may be the very one closed, and freed. False when `send` did
  // not run. Cheap while no endpoint was closed (a shared lock).
  template <typename Send>
  bool UnlessClosed(std::uint32_t rank, Send&& send) {
    std::shared_lock lock(closing_mutex_);
    if (any_closed_.load(std::memory_order_relaxed) && IsClosedLocked(rank)) return false;
    send();
    return true;
  }
  // How many failed peers' endpoints were closed (before shutdown).
  [[nodiscard]] std::uint64_t closed_for_failures() const { return closed_for_failures_.load(); }
  // Whether any peer's endpoint failed since the start.
  [[nodiscard]] bool AnyPeerFailed() const { return any_failed_.load(); }

 private:
  struct Peer {
    std::shared_ptr<UcxEndpoint> endpoint;  // null once retired
    Status failure;
  };
  struct Retired {
    std::uint32_t rank = 0;
    std::shared_ptr<UcxEndpoint> endpoint;
  };
  struct LateFailure {
    std::uint32_t rank = 0;
    Status failure;
  };
  struct FencedRanks {
    std::uint32_t first = 0;
    std::uint32_t last = 0;
    Status cause;
  };
  // Under mutex_.
  [[nodiscard]] const Status* FenceOfLocked(std::uint32_t rank) const;
  void OnEndpointError(std::uint32_t rank, ucp_ep_h endpoint, ucs_status_t status);
  // For a rank whose endpoint is closed, or all once CloseAll began.
  [[nodiscard]] Status ClosedError(std::uint32_t rank) const;
  // Moves `rank`'s endpoint (`peer`) to retired_; mutex_ held.
  void RetireLocked(std::uint32_t rank, Peer& peer);
  // closing_mutex_ held (either way).
  [[nodiscard]] bool IsClosedLocked(std::uint32_t rank) const {
    return all_closed_ || closed_ranks_.contains(rank);
  }

  std::shared_ptr<UcxWorker> worker_;
  Peers peers_;
  mutable std::mutex mutex_;
  std::map<std::uint32_t, Peer> by_rank_;             // guarded by mutex_
  // Endpoints out of the table, closed once no lease holds them.
  std::vector<Retired> retired_;  // guarded by mutex_
  // Endpoints that lost a race to connect (made by two threads at once),
  // kept open until CloseAll: UCX may have matched one of them, not the
  // one in use, with the peer's own endpoint, which makes it the reply
  // endpoint of the peer's requests.
  std::vector<std::shared_ptr<UcxEndpoint>> spare_;  // guarded by mutex_
  bool closing_all_ = false;                         // guarded by mutex_
  // Failures recorded after UCX's error callback ran, to report.
  std::vector<LateFailure> late_failures_;  // guarded by mutex_
  std::vector<FencedRanks> fenced_;         // guarded by mutex_
  // Whether fenced_ is not empty: the common case reads no lock for it.
  std::atomic<bool> any_fenced_{false};
  // Whether retired_ or late_failures_ may hold any.
  std::atomic<bool> retired_waiting_{false};
  std::atomic<bool> any_failed_{false};
  // Held shared while a reply is sent on a reply endpoint, exclusively while
  // ranks are added to closed_ranks_ (before their endpoints close).
  mutable std::shared_mutex closing_mutex_;
  std::unordered_set<std::uint32_t> closed_ranks_;  // guarded by closing_mutex_
  bool all_closed_ = false;                         // guarded by closing_mutex_; CloseAll
  std::atomic<bool> any_closed_{false};
  std::atomic<std::uint64_t> closed_for_failures_{0};
};

}  // namespace sray::transport
