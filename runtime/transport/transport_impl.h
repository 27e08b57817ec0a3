#pragma once

// Transport's implementation, shared by the files that define it:
// transport.cc (calls, sends, posts, pulls: what leaves this process) and
// transport_serving.cc (what arrives: receiving, checking and serving
// frames). Its parts live in their own files: endpoints
// (peer_endpoints.h), calls awaiting replies (pending_calls.h), posted
// messages (outbox.h), who drives the worker (progress_loop.h), receive
// buffers (receive_buffers.h) and the wire format (frame.h,
// message_batch.h, active_message.h).
//
// Ownership: the Impl owns its parts; the progress loop is declared last so
// that its thread is joined before anything it uses is destroyed.
// Thread-safety: as Transport's (transport.h).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "transport/active_message.h"
#include "transport/burst_end_watch.h"
#include "transport/outbox.h"
#include "transport/peer_endpoints.h"
#include "transport/pending_calls.h"
#include "transport/progress_loop.h"
#include "transport/receive_buffers.h"
#include "transport/same_host_reads.h"
#include "transport/shared_memory_fifos.h"
#include "transport/transport.h"

namespace sray::transport {

struct Responder::State {
  Transport::Impl* impl = nullptr;
  ucp_ep_h reply_endpoint = nullptr;
  FrameHeader header{};
  // The request's handler runs on handler_thread until handler_returned is
  // set; only an answer given within it may use reply_endpoint, which UCX
  // frees once the requester dies when UCX made it itself.
  std::thread::id handler_thread;
  std::atomic<bool> handler_returned{false};
  std::atomic<bool> answered{false};
  [[nodiscard]] bool InItsHandler() const {
    return !handler_returned.load() && std::this_thread::get_id() == handler_thread;
  }
  // Within the handler on the request's endpoint, later on this process's own.
  void Send(Result<Bytes> result);
  ~State();
};

class Transport::Impl final : private ProgressLoop::Client, private FrameSink {
 public:
  Impl(TransportOptions options, std::shared_ptr<UcxWorker> worker);
  ~Impl() override;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  Status Start();
  // Stops the progress thread, fails the calls still pending, closes the
  // endpoints. Idempotent.
  void Shutdown();
  void NotePeerGone();
  void SetPeerFailureHandler(std::function<void(std::uint32_t, const Status&)> handler);
  void SetBurstEndHandler(std::function<void()> handler);
  [[nodiscard]] bool PeerFailed(std::uint32_t rank) const { return endpoints_.HasFailed(rank); }
  void Fence(std::uint32_t first, std::uint32_t last, const Status& cause);

  [[nodiscard]] std::uint32_t rank() const { return options_.rank; }
  [[nodiscard]] Result<Bytes> LocalAddress(bool network_only) const {
    return worker_->Address(network_only);
  }
  void RegisterRequestHandler(std::uint32_t method, RequestHandler handler);
  void RegisterDeferredRequestHandler(std::uint32_t method, DeferredRequestHandler handler);
  void RegisterOneWayHandler(std::uint32_t method, OneWayHandler handler);

  void CallAsync(std::uint32_t rank, std::uint32_t method, std::span<const std::byte> payload,
                 std::function<void(Result<Bytes>)> done,
                 std::optional<std::chrono::milliseconds> timeout);
  // Fails the async calls whose timeout passed and whose request has left;
  // on the progress thread (Housekeeping).
  void ExpireAsyncCalls(std::chrono::steady_clock::time_point now);
  Result<Bytes> Call(std::uint32_t rank, std::uint32_t method, std::span<const std::byte> payload,
                     std::optional<std::chrono::milliseconds> timeout);
  Status Send(std::uint32_t rank, std::uint32_t method, std::span<const std::byte> payload);
  void Post(std::uint32_t rank, std::uint32_t method, Bytes payload, bool send_here);
  Result<std::unique_ptr<RegisteredMemory>> Register(void* address, std::size_t length,
                                                     const std::optional<SharedFileRegion>& file) {
    return RegisteredMemory::Map(worker_, address, length, file);
  }
  Status Pull(std::uint32_t rank, std::uint64_t remote_address,
              std::span<const std::byte> packed_key, void* local, std::size_t length,
              std::optional<std::chrono::milliseconds> timeout, std::shared_ptr<void> local_owner);
  bool ProgressHere(const std::function<bool()>& done, std::chrono::microseconds spin) {
    return loop_.ProgressHere(done, spin);
  }
  [[nodiscard]] TransportStatistics statistics() const;

  // Answers a request while its handler runs, from any thread: UCX runs in
  // multi-thread mode. The reply endpoint may be this transport's own
  // endpoint to the requester (UCX matches the two): once that was closed
  // (the requester failed), the reply is dropped
  // (PeerEndpoints::UnlessClosed). One UCX made itself is freed by UCX when
  // the requester dies, so answers given later go by SendLateReply.
  void SendReply(ucp_ep_h reply_endpoint, const FrameHeader& header, Result<Bytes> result);
  // Answers a request whose handler has returned, from any thread: on this
  // transport's own endpoint to the requester (made now if need be, never
  // inside a UCX callback), and on the request's endpoint only when the
  // requester's address is unknown here.
  void SendLateReply(ucp_ep_h request_endpoint, const FrameHeader& header, Result<Bytes> result);

 private:
  // What a send callback gets: the call whose request it sent, or the frame
  // it sent (UCX reads header and payload until the send completes).
  struct SendContext {
    Impl* impl;
    std::shared_ptr<PendingCall> call;
    OwnedFrame frame;
  };
  // A Send or Pull waited for by its caller.
  // Owned by the UCX request once it started: freed by its callback, so
  // what it keeps lives as long as UCX may use it (for ever, if the request
  // never completes).
  struct OperationContext {
    std::shared_ptr<Completion> completion;
    std::shared_ptr<void> local_memory;     // a pull's destination, when its owner was given
    std::shared_ptr<RemoteKey> remote_key;  // a pull's unpacked key, which its get uses
    OwnedFrame frame;                       // a send's copy of its frame
  };

  [[nodiscard]] std::string Describe(std::uint32_t rank) const;
  void NotifyPeerFailure(std::uint32_t rank, const Status& failure);

  // ---- what leaves (transport.cc) ----
  std::shared_ptr<PendingCall> StartCall(std::uint32_t rank, std::uint32_t method,
                                         std::span<const std::byte> payload,
                                         std::function<void(Result<Bytes>)> done);
  void Transmit(const std::shared_ptr<PendingCall>& call, std::span<const std::byte> payload);
  // Sends calls handed to the progress thread (StartCall), once send_mutex_
  // is released: their completion may run a caller's callback.
  void TransmitHandedOffCalls(std::vector<PostedMessage> calls);
  // Calls handed over that will never be sent (the transport stops): each
  // fails and is marked sent, so that its caller, who keeps the payload
  // until then, is released.
  void FinishUnsentCalls(std::vector<PostedMessage> calls);
  void ReleaseHandedOffCalls();
  void FailCall(std::uint64_t id, const Status& status);
  // Returns once UCX no longer reads the payload of `call`, which timed
  // out: its send completed, or failed with its peer. `completion` is the
  // call's, done when its send is over.
  void AwaitSendOver(PendingCall& call, Completion& completion);
  // Starts one UCX operation on `endpoint` through `start` (given its
  // handle, the request parameters and the context, `keep` moved to the
  // heap) and waits for it, within `limit`, without the endpoint's lease.
  // Defined in transport.cc, its only user.
  template <typename StartOperation>
  Status RunOperation(std::uint32_t rank, std::shared_ptr<UcxEndpoint> endpoint,
                      std::string_view verb, std::chrono::milliseconds limit, OperationContext keep,
                      StartOperation&& start);
  Status FinishOperation(ucs_status_ptr_t request, OperationContext* context,
                         const std::shared_ptr<Completion>& completion, std::uint32_t rank,
                         std::string_view verb, std::chrono::milliseconds limit);
  // True when a reply from this thread should go through the outbox.
  [[nodiscard]] bool ShouldHandOff() const;
  void TransmitFrame(std::uint32_t rank, FrameKind kind, std::uint32_t method, Bytes payload);
  [[nodiscard]] OwnedFrame MakeReply(const FrameHeader& header, Result<Bytes> result) const;
  // For whoever sends the outbox next.
  void HandOffReply(PostedMessage::Kind kind, std::uint32_t rank, ucp_ep_h request_endpoint,
                    OwnedFrame reply);
  // Sends `frame` on `endpoint`, kept alive until UCX is done with it
  // (OnSendComplete frees it); dropped when the send fails at once.
  void SendOwnedFrame(ucp_ep_h endpoint, OwnedFrame frame);
  // Posted messages to UCX, under send_mutex_ (one sender at a time keeps
  // each peer's messages in posting order). True if there were any. Calls
  // handed over are moved to `calls`, for TransmitHandedOffCalls.
  bool SendPostedLocked(std::vector<PostedMessage>& calls);
  // Fails the calls waiting for fenced-off `rank` with `cause`; those whose
  // request is still being sent go to stuck_sends_.
  void FailCallsToFenced(std::uint32_t rank, const Status& cause);
  // Closes, by force, the endpoints of fenced peers that took none of a
  // failed call's request within kSendAfterTimeoutGrace: the forced close
  // ends the send (UCX 1.13 cancels none), and so the call, whose caller
  // keeps its payload until then. Progress thread (housekeeping).
  void CloseEndpointsOfStuckSends(std::chrono::steady_clock::time_point now);
  // Fails the calls to peers whose process is gone, when the liveness probe
  // can tell (same node) and UCX has not noticed yet.
  void ProbeAwaitedPeers(std::chrono::steady_clock::time_point now);
  // The liveness probe found `rank`'s process gone: marks it failed (its
  // endpoint then closes), fails its calls, tells the failure handler.
  void MarkPeerGone(std::uint32_t rank);

  // ProgressLoop::Client
  bool SendPosted() override;
  [[nodiscard]] bool HasPosted() const override {
    return outbox_.HasMessages() || loopback_.HasMessages();
  }
  // One-way messages this process posted to its own rank, to its handlers
  // without UCX, in posting order. True if there were any.
  bool DeliverLoopback();
  void Housekeeping(std::chrono::steady_clock::time_point now) override;
  // After a burst of messages: hands back the memory it left in caches
  // (burst_end_watch.h).
  void HandBackMemoryAfterBursts(std::chrono::steady_clock::time_point now);
  // FrameSink: sends on endpoints this transport made itself (never a
  // peer's reply endpoint, which UCX frees when the peer dies), so a dead or
  // unknown peer's message is dropped, never a crash. Replies excepted.
  void TransmitReply(std::uint32_t rank, ucp_ep_h reply_endpoint, OwnedFrame reply) override;
  void TransmitLateReply(std::uint32_t rank, ucp_ep_h request_endpoint, OwnedFrame reply) override;
  void TransmitOneWay(std::uint32_t rank, std::uint32_t method, Bytes payload) override;
  void TransmitBatch(std::uint32_t rank, Bytes batch) override;

  static void OnSendComplete(void* request, ucs_status_t status, void* user_data) noexcept;
  // Sends whose completion is OnSendComplete go through here; those that do
  // not complete at once are counted in sends_in_progress_.
  ucs_status_ptr_t StartTrackedSend(ucp_ep_h endpoint, const ActiveMessageSend& send);
  static void OnOperationComplete(void* request, ucs_status_t status, void* user_data) noexcept;

  // ---- what arrives (transport_serving.cc) ----
  struct IncomingRendezvous {
    Impl* impl;
    FrameHeader header;
    ucp_ep_h reply_endpoint;
    ReceiveBuffer buffer;
    std::size_t length;
  };
  static ucs_status_t OnActiveMessage(void* arg, const void* header, std::size_t header_length,
                                      void* data, std::size_t length,
                                      const ucp_am_recv_param_t* param) noexcept;
  static void OnRendezvousData(void* request, ucs_status_t status, std::size_t length,
                               void* user_data) noexcept;
  static ucs_status_t OnSkippedSlot(void* arg, const void* header, std::size_t header_length,
                                    void* data, std::size_t length,
                                    const ucp_am_recv_param_t* param) noexcept;
  // Watches this worker's shared-memory receive FIFOs for a slot a killed
  // sender left half-written (progress thread only).
  void RepairStalledSlots(std::chrono::steady_clock::time_point now);
  // Hands a checked frame to what it is for: a handler, a waiting call.
  void DeliverFrame(const FrameHeader& header, ucp_ep_h reply_endpoint,
                    std::span<const std::byte> payload) noexcept;
  void ServeRequest(const FrameHeader& header, ucp_ep_h reply_endpoint,
                    std::span<const std::byte> payload);
  void ServeOneWay(const FrameHeader& header, std::span<const std::byte> payload);
  void ServeBatch(const FrameHeader& header, std::span<const std::byte> payload);

  const TransportOptions options_;
  const std::shared_ptr<UcxWorker> worker_;
  std::atomic<std::uint64_t> next_request_id_{1};
  PendingCalls pending_calls_;
  struct AsyncDeadline {
    std::chrono::steady_clock::time_point at;
    std::weak_ptr<PendingCall> call;  // expired once it completed
    std::chrono::milliseconds timeout;
  };
  std::mutex async_deadlines_mutex_;
  std::vector<AsyncDeadline> async_deadlines_;  // guarded by async_deadlines_mutex_
  // Whether async_deadlines_ may hold any: housekeeping reads no lock else.
  std::atomic<bool> async_deadlines_waiting_{false};
  struct StuckSend {
    std::weak_ptr<PendingCall> call;  // expired or sent: no longer stuck
    std::uint32_t rank = 0;
    std::chrono::steady_clock::time_point since;
  };
  std::mutex stuck_sends_mutex_;
  std::vector<StuckSend> stuck_sends_;  // guarded by stuck_sends_mutex_
  std::atomic<bool> stuck_sends_waiting_{false};
  SameHostReads same_host_reads_;
  // Before endpoints_ and loop_, which count on it.
  LongOperations long_operations_;
  PeerEndpoints endpoints_;
  Outbox outbox_;
  // Posts to this process's own rank (the driver's node manager, head and
  // owner share one): handed to the handlers directly, one thread at a time
  // (loopback_mutex_) so they keep their order.
  Outbox loopback_;
  // Copied out under the lock, called without it (it may take its own).
  std::mutex failure_handler_mutex_;
  std::shared_ptr<const std::function<void(std::uint32_t, const Status&)>> failure_handler_;
  // Called under its lock, so that SetBurstEndHandler({}) waits out a call
  // in progress (the handler may use what its setter frees next).
  std::mutex burst_end_handler_mutex_;
  std::function<void()> burst_end_handler_;
  BurstEndWatch burst_end_watch_{BurstEndWatch::Clock::now(), 0};  // progress thread only
  std::mutex loopback_mutex_;
  // Held while posted messages are handed to UCX (by the progress thread,
  // or by a thread that sends its own message directly).
  std::mutex send_mutex_;
  ReceiveBufferPool receive_buffers_;
  std::chrono::steady_clock::time_point last_liveness_probe_{};  // progress thread only
  // Null when repair is off; progress thread only.
  std::unique_ptr<StalledSlotRepair> stalled_slot_repair_;
  std::chrono::steady_clock::time_point last_stalled_slot_check_{};
  std::atomic<std::uint64_t> stalled_slots_skipped_{0};
  std::atomic<std::uint64_t> skipped_slot_messages_{0};
  std::atomic<std::uint64_t> late_replies_on_own_endpoint_{0};
  std::atomic<std::uint64_t> late_replies_on_request_endpoint_{0};
  std::atomic<std::uint64_t> late_replies_dropped_{0};

  std::shared_mutex handlers_mutex_;
  std::unordered_map<std::uint32_t, RequestHandler> request_handlers_;
  std::unordered_map<std::uint32_t, OneWayHandler> one_way_handlers_;
  std::unordered_map<std::uint32_t, DeferredRequestHandler> deferred_handlers_;

  std::atomic<std::uint64_t> requests_served_{0};
  std::atomic<std::uint64_t> batches_received_{0};
  std::atomic<std::uint64_t> rejected_frames_{0};
  std::atomic<std::uint64_t> malformed_frames_{0};
  std::atomic<bool> peer_gone_{false};
  // Rendezvous receives started and not yet finished: UCX aborts the
  // process when its worker is destroyed with one still in progress.
  std::atomic<std::size_t> rendezvous_in_progress_{0};
  // Messages that arrived once Shutdown began (and were dropped): peers
  // still talking, whose traffic makes UCX requests of its own.
  std::atomic<std::uint64_t> arrived_during_shutdown_{0};
  // Sends that did not complete at once and have not completed yet.
  std::atomic<std::int64_t> sends_in_progress_{0};

  ProgressLoop loop_;  // last: see Ownership above
};

}  // namespace sray::transport
