#pragma once

// A transport's endpoints: one per peer rank, connected on first use from
// the address the resolver returns, with the peer's failure recorded beside
// it once known (from UCX's error callback or the liveness probe). A failed
// endpoint stays open until shutdown: another thread may be about to send on
// it (operations on it just fail), and closing it would free it under that
// thread's feet.
//
// Thread-safety: every member may be called from any thread, except
// CloseUnused and CloseAll, which progress the worker (never inside a UCX
// callback). `on_failure` runs inside UCX's error callback.

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
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
  };

  PeerEndpoints(std::shared_ptr<UcxWorker> worker, Peers peers);
  ~PeerEndpoints();
  PeerEndpoints(const PeerEndpoints&) = delete;
  PeerEndpoints& operator=(const PeerEndpoints&) = delete;

  // The endpoint to `rank`, connecting first if needed; the peer's failure
  // once it is known. Resolving may block (a PMIx lookup).
  Result<ucp_ep_h> For(std::uint32_t rank);
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
  // The cause `rank` was fenced off with; ok when it was not.
  [[nodiscard]] Status FenceOf(std::uint32_t rank) const;
  // One wording for every way a peer is found dead, so callers and tests
  // can rely on it.
  [[nodiscard]] Status PeerFailure(std::uint32_t rank, std::string_view cause) const;

  // Closes endpoints that lost a race to connect (made by two threads at
  // once); the progress thread calls it.
  void CloseUnused();
  // Closes everything, letting peers see an orderly disconnect for a moment;
  // false when some close did not finish.
  bool CloseAll();
  // Whether any peer's endpoint failed since the start.
  [[nodiscard]] bool AnyPeerFailed() const { return any_failed_.load(); }

 private:
  struct Peer {
    std::unique_ptr<UcxEndpoint> endpoint;
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

  std::shared_ptr<UcxWorker> worker_;
  Peers peers_;
  mutable std::mutex mutex_;
  std::map<std::uint32_t, Peer> by_rank_;             // guarded by mutex_
  std::vector<std::unique_ptr<UcxEndpoint>> unused_;  // guarded by mutex_
  std::vector<FencedRanks> fenced_;                   // guarded by mutex_
  // Whether fenced_ is not empty: the common case reads no lock for it.
  std::atomic<bool> any_fenced_{false};
  std::atomic<bool> unused_waiting_{false};
  std::atomic<bool> any_failed_{false};
};

}  // namespace sray::transport
