#pragma once

// Messaging between the processes of a job over UCX: request/response RPC,
// one-way messages, and zero-copy pulls of registered memory.
//
// Design:
// - One UCX worker per process in UCS_THREAD_MODE_MULTI. A progress thread
//   sleeps on the worker's event fd (arm + poll) instead of spinning a core;
//   a thread waiting for its own reply progresses the worker itself for up
//   to 50 us without progress first, a thread waiting for work by message
//   may drive it for longer (ProgressHere), and after activity the progress
//   thread polls for 100 us before it sleeps (docs/ARCHITECTURE.md has the
//   measured costs).
// - Posted one-way messages that wait for the same peer travel in one frame
//   (transport/message_batch.h), in the order they were posted.
// - Endpoints are created lazily on first use, from the address the
//   resolver returns (PMIx in a job), with peer error handling: when a peer
//   dies every pending and future call to it fails with an error naming it.
// - A slot of this process's shared-memory receive FIFO that a killed sender
//   left half-written is skipped after a while, so that the other local
//   senders are heard again (shared_memory_fifos.h; UCX 1.13 only).
// - Every frame carries a token derived from the job secret; frames without
//   the right token are counted and dropped, and the connection is closed.
// - Handlers run on whichever thread progresses the worker, inside a UCX
//   callback: they must be quick and must not make blocking calls on this
//   transport (such a call fails at once with an error saying so).
//
// Thread-safety: every public member may be called from any thread.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "transport/bytes.h"
#include "transport/frame.h"
#include "transport/ucx_handles.h"

namespace sray::transport {

// Returns the UCX worker address of `rank`, for the first connection to it.
using AddressResolver = std::function<Result<Bytes>(std::uint32_t rank)>;
// Answers a request; an error Status travels back to the caller.
using RequestHandler =
    std::function<Result<Bytes>(std::uint32_t source_rank, std::span<const std::byte> payload)>;
using OneWayHandler =
    std::function<void(std::uint32_t source_rank, std::span<const std::byte> payload)>;

class Transport;
// Answers one request later, from any thread, for handlers whose work needs
// blocking calls of their own. Copies share one answer: the first Reply
// wins. If every copy is dropped unanswered the caller gets an error at once
// rather than waiting for its timeout. Answered inside the handler's call it
// goes on the endpoint the request came by; later, on this process's own
// endpoint to the requester (UCX frees the request's endpoint when the
// requester dies). Must not outlive its Transport.
class Responder {
 public:
  void Reply(Result<Bytes> result) const;
  struct State;
  explicit Responder(std::shared_ptr<State> state) : state_(std::move(state)) {}

 private:
  std::shared_ptr<State> state_;
};
using DeferredRequestHandler = std::function<void(
    std::uint32_t source_rank, std::span<const std::byte> payload, Responder responder)>;
// Describes a rank for error messages, e.g. "rank 2 (node 1, n2)".
using RankDescriber = std::function<std::string(std::uint32_t rank)>;
// False once `rank`'s process is known to be gone; true when unknown. UCX
// notices dead peers over the network at once, but its shared-memory
// keepalive can take many seconds; a probe of the local process table
// closes that gap for peers on the same node.
using LivenessProbe = std::function<bool(std::uint32_t rank)>;

struct TransportOptions {
  std::uint32_t rank = 0;
  JobToken token{};
  AddressResolver resolve_address;
  RankDescriber describe_rank;
  LivenessProbe peer_alive;
  std::chrono::milliseconds default_timeout{std::chrono::seconds(60)};
  // How often UCX probes idle connections (UCX_KEEPALIVE_INTERVAL wins).
  std::string keepalive_interval = "1s";
  // How long a slot of this process's shared-memory receive queue may stay
  // taken but unwritten before it is taken for a killed sender's and
  // skipped (shared_memory_fifos.h); zero: never.
  std::chrono::milliseconds stalled_slot_limit{std::chrono::seconds(2)};
};

struct TransportStatistics {
  std::uint64_t requests_served = 0;
  std::uint64_t rejected_frames = 0;   // wrong or missing job token
  std::uint64_t malformed_frames = 0;  // header or batch failed to decode
  std::uint64_t batches_received = 0;  // frames carrying several one-way messages
  std::uint64_t same_host_pulls = 0;   // pulls copied from a file of this host (same_host_reads.h)
  // Slots of the shared-memory receive queue that a killed sender left
  // half-written, skipped (shared_memory_fifos.h).
  std::uint64_t stalled_slots_skipped = 0;
  // The empty messages those slots were filled with, as they arrived.
  std::uint64_t skipped_slot_messages = 0;
  // Endpoints to peers found failed (or fenced off with a request stuck)
  // that were closed before shutdown.
  std::uint64_t failed_peer_endpoints_closed = 0;
  // Answers given after their request's handler returned (Responder): on
  // this process's own endpoint to the requester; on the request's endpoint,
  // the requester's address being unknown here; dropped, the requester
  // being gone, fenced off or unreachable.
  std::uint64_t late_replies_on_own_endpoint = 0;
  std::uint64_t late_replies_on_request_endpoint = 0;
  std::uint64_t late_replies_dropped = 0;
};

class Transport {
 public:
  static Result<std::unique_ptr<Transport>> Create(TransportOptions options);
  // Uses a worker made earlier (its address was published before the token
  // was known, as in wire-up).
  static Result<std::unique_ptr<Transport>> Create(TransportOptions options,
                                                   std::shared_ptr<UcxWorker> worker);
  // Stops the progress thread, fails calls still pending, closes endpoints.
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  [[nodiscard]] std::uint32_t rank() const;
  [[nodiscard]] Result<Bytes> LocalAddress(bool network_only) const;
  // A peer of this process died (a node manager's worker exited): at the
  // end the UCX worker is left to the process's end, not destroyed
  // (UcxWorker::Abandon says why).
  void NotePeerGone();
  // `handler` learns of each peer marked failed (its endpoint failed, or its
  // process is gone). It runs on the progress thread (or a UCX callback), so
  // it must only hand the news on (post it), never block or call this
  // transport's blocking calls; it may hear of one rank more than once.
  void SetPeerFailureHandler(std::function<void(std::uint32_t rank, const Status& failure)> handler);
  // `handler` runs on the progress thread once a burst of messages has
  // ended (burst_end_watch.h): to hand back memory the burst left in the
  // caller's caches. It must not block on this transport, nor call this
  // setter (it runs under the lock the setter takes). Replacing it (or
  // clearing it with {}) waits for a call in progress to return.
  void SetBurstEndHandler(std::function<void()> handler);
  // Whether this transport marked `rank` failed (for good).
  [[nodiscard]] bool PeerFailed(std::uint32_t rank) const;
  // Fences ranks `first` to `last` off for good, though their processes may
  // live on (a node the head declared lost while frozen or cut off): calls
  // waiting for them fail now with `cause` (one whose request a stopped peer
  // has not taken within 5 s, when its endpoint is closed by force for it:
  // until then UCX reads the caller's payload), nothing more is sent to them,
  // their one-way messages and replies are dropped, and their requests are
  // answered with a PermissionDenied error that carries `cause`, so that
  // such a process learns it is out of the job (unless its endpoint was
  // closed for a request it never took: then its requests go unanswered).
  void Fence(std::uint32_t first, std::uint32_t last, const Status& cause);

  // Register before peers send the method; a later registration replaces.
  void RegisterRequestHandler(std::uint32_t method, RequestHandler handler);
  void RegisterOneWayHandler(std::uint32_t method, OneWayHandler handler);
  void RegisterDeferredRequestHandler(std::uint32_t method, DeferredRequestHandler handler);

  // Sends a request and waits for its response (or the timeout, or the
  // peer's death). `payload` is not copied and must stay valid meanwhile.
  // A call that times out returns once UCX no longer reads its payload: a
  // peer that stopped taking a large request (a stopped process) holds the
  // call past its timeout until it takes it or is found failed (its
  // endpoint is then closed by force); a warning says so after 5 s.
  Result<Bytes> Call(std::uint32_t rank, std::uint32_t method, std::span<const std::byte> payload,
                     std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // Sends a request and calls `done` once with the response or error, from
  // the progress thread. `payload` must stay valid until `done` runs. With
  // `timeout`, a call still unanswered then fails ("no reply ... within"),
  // though never before its request has left (until then UCX may read the
  // payload); without, it waits for the reply or the peer's failure (a
  // deferred answer may legitimately take long).
  void CallAsync(std::uint32_t rank, std::uint32_t method, std::span<const std::byte> payload,
                 std::function<void(Result<Bytes>)> done,
                 std::optional<std::chrono::milliseconds> timeout = std::nullopt);
  // Sends a one-way message; returns once the payload may be reused.
  Status Send(std::uint32_t rank, std::uint32_t method, std::span<const std::byte> payload);
  // Queues a one-way message for the progress thread to send and returns at
  // once: no waiting, no contention for the UCX worker, allowed inside
  // handlers. Messages posted to one peer arrive in order. A send that fails
  // later (dead peer) is dropped; peer failure reaches callers by the usual
  // ways (pending calls fail, the liveness probe).
  // With `send_here`, a progress thread that sleeps (or is parked while
  // another thread drives the worker) is not woken for it: this thread sends
  // it, after what it posted before (lower latency for a lone message, and
  // no wake-up).
  void Post(std::uint32_t rank, std::uint32_t method, Bytes payload, bool send_here = false);

  // Drives the worker on the calling thread until `done()` or until `spin`
  // passes without progress; returns done(). Handlers then run on this
  // thread, so work they hand over needs no wake-up of another thread, and
  // the progress thread sleeps meanwhile. For a thread that waits for work
  // arriving by message (a worker between tasks). `done` must be cheap and
  // must not block. From a handler or the progress thread it only checks.
  bool ProgressHere(const std::function<bool()>& done, std::chrono::microseconds spin);

  // Registers local memory so peers can Pull from it. With `file`, the
  // memory is a shared mapping of that file region, and peers on this host
  // read the file instead (same_host_reads.h).
  Result<std::unique_ptr<RegisteredMemory>> Register(
      void* address, std::size_t length,
      const std::optional<SharedFileRegion>& file = std::nullopt);
  // Reads `length` bytes at `remote_address` of `rank`'s registered memory
  // (described by its packed key) into `local`: from the file behind it when
  // `rank` registered a file of this host, else with UCX RMA.
  // `local_owner` owns the memory at `local`: a pull that times out while
  // UCX may still write there (a holder that stopped progressing; UCX 1.13
  // cannot cancel a get) keeps it until UCX lets go, so the caller's release
  // of it frees nothing UCX writes into. Without one, the memory must stay
  // valid for as long as the peer may resume.
  Status Pull(std::uint32_t rank, std::uint64_t remote_address,
              std::span<const std::byte> packed_key, void* local, std::size_t length,
              std::optional<std::chrono::milliseconds> timeout = std::nullopt,
              std::shared_ptr<void> local_owner = nullptr);

  [[nodiscard]] TransportStatistics statistics() const;

  class Impl;

 private:
  explicit Transport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sray::transport
