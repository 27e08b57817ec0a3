// Transport: what leaves this process (calls, one-way sends, posted
// messages, pulls), and its lifetime. What arrives is served in
// transport_serving.cc; both define members of Transport::Impl
// (transport_impl.h).

#include <algorithm>
#include <mutex>

#include "common/block_pool.h"
#include "common/free_memory.h"
#include "common/log.h"
#include "transport/active_message.h"
#include "transport/transport_impl.h"
#include "transport/ucx_status.h"

namespace sray::transport {
namespace {

// How often ranks with calls in flight are probed for liveness.
constexpr std::chrono::milliseconds kLivenessInterval{250};
// How often the shared-memory receive FIFOs are looked at for a slot a
// killed sender left half-written.
constexpr std::chrono::milliseconds kStalledSlotCheckInterval{250};
// Long enough for the keepalive (1 s, core's UcxContext) to fail a send to a
// peer that died silently; a flush with nothing in flight takes microseconds.
constexpr std::chrono::milliseconds kQuiesceTime{3000};
// How long a call that timed out waits for its send to end before it says
// that it waits (AwaitSendOver); how long a call failed by a fence waits for
// its send to end before the fenced peer's endpoint is closed for it.
constexpr std::chrono::seconds kSendAfterTimeoutGrace{5};
// How often a caller whose request a peer holds (a send it has not taken, a
// pull) looks whether that peer was found failed or fenced off, to close
// its endpoint by force.
constexpr std::chrono::seconds kFailedPeerRecheck{1};
// Calls from this size up go through a busy progress thread (StartCall).
constexpr std::size_t kHandedOffCallBytes = std::size_t{64} << 10;

Status BlockingInCallbackError(std::string_view operation) {
  return Status::Internal(std::string(operation) +
                          " was called from inside a message handler, where it would "
                          "deadlock: reply from the handler or hand the work to another thread");
}

}  // namespace

Transport::Impl::Impl(TransportOptions options, std::shared_ptr<UcxWorker> worker)
    : options_(std::move(options)),
      worker_(std::move(worker)),
      endpoints_(worker_, PeerEndpoints::Peers{
                              .resolve_address = options_.resolve_address,
                              .alive = options_.peer_alive,
                              .describe = [this](std::uint32_t rank) { return Describe(rank); },
                              .on_failure =
                                  [this](std::uint32_t rank, const Status& failure) {
                                    pending_calls_.FailCallsTo(rank, failure);
                                    // Not for an endpoint that lost the race to
                                    // connect: the one in use may be fine.
                                    if (endpoints_.HasFailed(rank))
                                      NotifyPeerFailure(rank, failure);
                                  },
                              .long_operations = &long_operations_,
                              .after_connect = {}}),
      loop_(worker_, *this, &long_operations_) {}

Transport::Impl::~Impl() {
  Shutdown();
}

Status Transport::Impl::Start() {
  ucp_am_handler_param_t handler{};
  handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                       UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  handler.id = kActiveMessageId;
  handler.cb = &Impl::OnActiveMessage;
  handler.arg = this;
  handler.flags = UCP_AM_FLAG_WHOLE_MSG;
  SRAY_RETURN_IF_ERROR(FromUcs(ucp_worker_set_am_recv_handler(worker_->handle(), &handler),
                               "cannot register the active-message handler"));
  handler.id = kSkippedSlotMessageId;
  handler.cb = &Impl::OnSkippedSlot;
  SRAY_RETURN_IF_ERROR(FromUcs(ucp_worker_set_am_recv_handler(worker_->handle(), &handler),
                               "cannot register the handler of skipped queue slots"));
  if (options_.stalled_slot_limit.count() > 0 && !worker_->receive_fifos().empty()) {
    StalledSlotRepair::Settings settings;
    settings.stall_limit = options_.stalled_slot_limit;
    settings.skipped_slot_message_id = static_cast<std::uint16_t>(kSkippedSlotMessageId);
    settings.on_fill = [this](const SharedMemoryFifo& fifo, std::uint64_t sequence) {
      stalled_slots_skipped_.fetch_add(1);
      Log(LogLevel::kWarning,
          Describe(options_.rank) + ": slot " + std::to_string(sequence) +
              " of this process's shared-memory receive queue (segment " + fifo.identity() +
              ") stayed half-written for " + DescribeSeconds(options_.stalled_slot_limit) +
              " with no process that maps it paused, so its sender was killed while it sent: "
              "the slot was skipped (that message is lost with its sender) and messages from "
              "the other processes of this node arrive again");
    };
    stalled_slot_repair_ =
        std::make_unique<StalledSlotRepair>(worker_->receive_fifos(), std::move(settings));
  }
  return loop_.Start();
}

void Transport::Impl::Shutdown() {
  if (loop_.stopping()) return;
  loop_.Stop();
  for (auto& call : pending_calls_.TakeAll()) {
    call->Complete(Status::Unavailable("the transport of " + Describe(options_.rank) +
                                       " shut down before the reply came"));
  }
  ReleaseHandedOffCalls();
  const bool closed = endpoints_.CloseAll();
  const auto deadline = std::chrono::steady_clock::now() + kQuiesceTime;
  const bool flushed = worker_->Quiesce(kQuiesceTime);
  // Receives started before the stop (nothing new starts after it) end with
  // their data or with their closed endpoint's error.
  while (rendezvous_in_progress_.load() > 0 && std::chrono::steady_clock::now() < deadline) {
    ucp_worker_progress(worker_->handle());
  }
  const bool received = rendezvous_in_progress_.load() == 0;
  // Peers that still send keep making UCX requests of its own (a dropped
  // rendezvous is acknowledged to its sender, a new peer's wire-up is
  // answered) that no flush of ours can catch up with: destroying the
  // worker then may abort the process in UCX (ucp_ep_destroy_base,
  // proto_reqs; seen under srun when a driver left with 10,000 tasks in
  // flight). Only a worker that stayed quiet to the end is destroyed.
  // A send still in progress (a large message whose peer left before it
  // fetched it) is such a request too; it is not waited for: the processes
  // that shut down their transport exit right after.
  const bool idle = ucp_worker_progress(worker_->handle()) == 0;
  const bool quiet =
      idle && received && sends_in_progress_.load() == 0 && arrived_during_shutdown_.load() == 0;
  // After a peer died, UCX may hold requests no close or flush reaches
  // (UcxWorker::Abandon): the worker is left to the process's end rather
  // than destroyed into an assertion that aborts the process.
  if (!closed || !flushed || !quiet || endpoints_.AnyPeerFailed() || peer_gone_.load())
    worker_->Abandon();
}

void Transport::Impl::NotePeerGone() {
  peer_gone_.store(true);
}

std::string Transport::Impl::Describe(std::uint32_t rank) const {
  return options_.describe_rank ? options_.describe_rank(rank) : "rank " + std::to_string(rank);
}

void Transport::Impl::RegisterRequestHandler(std::uint32_t method, RequestHandler handler) {
  std::unique_lock lock(handlers_mutex_);
  request_handlers_[method] = std::move(handler);
}

void Transport::Impl::RegisterDeferredRequestHandler(std::uint32_t method,
                                                     DeferredRequestHandler handler) {
  std::unique_lock lock(handlers_mutex_);
  deferred_handlers_[method] = std::move(handler);
}

void Transport::Impl::RegisterOneWayHandler(std::uint32_t method, OneWayHandler handler) {
  std::unique_lock lock(handlers_mutex_);
  one_way_handlers_[method] = std::move(handler);
}

TransportStatistics Transport::Impl::statistics() const {
  return {.requests_served = requests_served_.load(),
          .rejected_frames = rejected_frames_.load(),
          .malformed_frames = malformed_frames_.load(),
          .batches_received = batches_received_.load(),
          .same_host_pulls = same_host_reads_.reads(),
          .stalled_slots_skipped = stalled_slots_skipped_.load(),
          .skipped_slot_messages = skipped_slot_messages_.load(),
          .failed_peer_endpoints_closed = endpoints_.closed_for_failures(),
          .late_replies_on_own_endpoint = late_replies_on_own_endpoint_.load(),
          .late_replies_on_request_endpoint = late_replies_on_request_endpoint_.load(),
          .late_replies_dropped = late_replies_dropped_.load()};
}

// ---- calls ------------------------------------------------------------------

void Transport::Impl::CallAsync(std::uint32_t rank, std::uint32_t method,
                                std::span<const std::byte> payload,
                                std::function<void(Result<Bytes>)> done,
                                std::optional<std::chrono::milliseconds> timeout) {
  auto call = StartCall(rank, method, payload, std::move(done));
  if (!timeout) return;
  std::lock_guard lock(async_deadlines_mutex_);
  async_deadlines_.push_back(
      {.at = std::chrono::steady_clock::now() + *timeout, .call = call, .timeout = *timeout});
  async_deadlines_waiting_.store(true, std::memory_order_relaxed);
}

void Transport::Impl::ExpireAsyncCalls(std::chrono::steady_clock::time_point now) {
  std::vector<std::shared_ptr<PendingCall>> expired;
  std::vector<std::chrono::milliseconds> timeouts;
  if (!async_deadlines_waiting_.load(std::memory_order_relaxed)) return;
  {
    std::lock_guard lock(async_deadlines_mutex_);
    std::erase_if(async_deadlines_, [&](const AsyncDeadline& deadline) {
      auto call = deadline.call.lock();
      if (!call) return true;  // answered, or failed otherwise
      if (now < deadline.at || !call->sent()) return false;
      expired.push_back(std::move(call));
      timeouts.push_back(deadline.timeout);
      return true;
    });
    async_deadlines_waiting_.store(!async_deadlines_.empty(), std::memory_order_relaxed);
  }
  // Outside the lock: `done` runs here and may make another async call,
  // but, as for a reply, not a blocking one (it would wait on this thread).
  CallbackScope scope;
  for (std::size_t index = 0; index < expired.size(); ++index) {
    FailCall(expired[index]->id(),
             Status::Unavailable("no reply from " + Describe(expired[index]->rank()) + " within " +
                                 std::to_string(timeouts[index].count()) +
                                 " ms: the peer is overloaded or hung"));
  }
}

std::shared_ptr<PendingCall> Transport::Impl::StartCall(std::uint32_t rank, std::uint32_t method,
                                                        std::span<const std::byte> payload,
                                                        std::function<void(Result<Bytes>)> done) {
  const std::uint64_t id = next_request_id_.fetch_add(1);
  auto call = std::make_shared<PendingCall>(id, rank,
                                            EncodeFrameHeader({.kind = FrameKind::kRequest,
                                                               .source_rank = options_.rank,
                                                               .method = method,
                                                               .request_id = id,
                                                               .token = options_.token}),
                                            std::move(done));
  pending_calls_.Add(call);
  // A large call made while the progress thread is busy goes through it:
  // sent from here, the caller spun on the UCX worker's lock while the
  // progress thread held it moving earlier messages (12% of the samples of
  // a 1 MiB TCP stream, docs/benchmarks.md), on a core the receiver needed.
  // Small calls are sent from here, where a hand-off would add its latency.
  if (payload.size() >= kHandedOffCallBytes && rank != options_.rank && ShouldHandOff()) {
    outbox_.Push({.kind = PostedMessage::Kind::kCall,
                  .rank = rank,
                  .method = method,
                  .payload = {},
                  .reply_endpoint = nullptr,
                  .reply = {},
                  .call = call,
                  .call_payload = payload});
    loop_.NoticePosted();
    // Shutdown may have released the handed-off calls before this one came.
    if (loop_.stopping()) ReleaseHandedOffCalls();
    return call;
  }
  Transmit(call, payload);
  return call;
}

void Transport::Impl::TransmitHandedOffCalls(std::vector<PostedMessage> calls) {
  if (calls.empty()) return;
  // Their callbacks run here, as when a reply completes them: outside
  // send_mutex_, and refused blocking calls.
  const CallbackScope scope;
  if (loop_.stopping()) {
    FinishUnsentCalls(std::move(calls));
    return;
  }
  for (auto& message : calls) {
    // Timed out or failed while it waited: its caller may be waiting for
    // the send to be over, and nothing is sent.
    if (message.call->has_outcome()) {
      message.call->MarkSent(Status::Ok());
      continue;
    }
    Transmit(message.call, message.call_payload);
  }
}

void Transport::Impl::FinishUnsentCalls(std::vector<PostedMessage> calls) {
  for (auto& message : calls) {
    if (message.kind != PostedMessage::Kind::kCall) continue;
    FailCall(message.call->id(), Status::Unavailable("the transport of " + Describe(options_.rank) +
                                                     " shut down before the call was sent"));
    message.call->MarkSent(Status::Ok());  // nothing was sent
  }
}

void Transport::Impl::ReleaseHandedOffCalls() {
  std::vector<PostedMessage> messages;
  {
    std::lock_guard lock(send_mutex_);
    messages = outbox_.TakeAll();
  }
  FinishUnsentCalls(std::move(messages));
}

void Transport::Impl::Transmit(const std::shared_ptr<PendingCall>& call,
                               std::span<const std::byte> payload) {
  auto endpoint = endpoints_.For(call->rank());
  if (!endpoint.ok()) {
    call->MarkSent(Status::Ok());  // nothing was sent
    FailCall(call->id(), endpoint.status());
    return;
  }
  // The peer may have failed between For and the registration in StartCall;
  // failing its calls may then have missed this one.
  if (Status failure = endpoints_.FailureOf(call->rank()); !failure.ok()) {
    call->MarkSent(Status::Ok());  // nothing was sent
    FailCall(call->id(), failure);
    return;
  }
  auto* context = new SendContext{this, call, {}};
  const ucs_status_ptr_t request =
      StartTrackedSend((*endpoint)->handle(), {.header = call->header(),
                                               .payload = payload,
                                               .on_complete = &Impl::OnSendComplete,
                                               .user_data = context,
                                               .reply_endpoint_wanted = true});
  if (request == nullptr) {
    delete context;
    call->MarkSent(Status::Ok());
  } else if (UCS_PTR_IS_ERR(request)) {
    delete context;
    call->MarkSent(Status::Ok());  // nothing is in flight
    FailCall(call->id(),
             FromUcs(UCS_PTR_STATUS(request), "cannot send to " + Describe(call->rank())));
  } else if (call->SetSendRequest(request)) {
    // Failed (timed out) while this thread started the send, a call handed
    // to the progress thread: its caller found no request to cancel.
    ucp_request_cancel(worker_->handle(), request);
  }
}

void Transport::Impl::FailCall(std::uint64_t id, const Status& status) {
  pending_calls_.Complete(id, status);
}

Result<Bytes> Transport::Impl::Call(std::uint32_t rank, std::uint32_t method,
                                    std::span<const std::byte> payload,
                                    std::optional<std::chrono::milliseconds> timeout) {
  if (InUcxCallback()) return BlockingInCallbackError("Call");
  auto completion = std::make_shared<Completion>();
  // A first call to a peer connects before this thread counts as waiting:
  // resolving its address (a PMIx lookup) may take long, and the progress
  // thread must not stay off the worker meanwhile. A peer that cannot be
  // reached fails the call here, as StartCall would say.
  if (auto endpoint = endpoints_.For(rank); !endpoint.ok()) return endpoint.status();
  ProgressLoop::ReplyExpected reply_expected(loop_);
  auto call = StartCall(rank, method, payload, [completion](Result<Bytes> result) {
    if (result.ok()) {
      completion->Finish(Status::Ok(), std::move(result).value());
    } else {
      completion->Finish(result.status());
    }
  });
  const auto limit = timeout.value_or(options_.default_timeout);
  if (!loop_.WaitFor(*completion, limit, &reply_expected)) {
    FailCall(call->id(), Status::Unavailable("timed out"));
    AwaitSendOver(*call, *completion);
    return Status::Unavailable("no reply from " + Describe(rank) + " within " +
                               std::to_string(limit.count()) +
                               " ms: the peer is overloaded or hung");
  }
  if (!completion->status.ok()) return completion->status;
  return std::move(completion->data);
}

void Transport::Impl::AwaitSendOver(PendingCall& call, Completion& completion) {
  // The call completes once its send is over (pending_calls.h).
  call.CancelSend([this](void* request) { ucp_request_cancel(worker_->handle(), request); });
  if (loop_.WaitFor(completion, kSendAfterTimeoutGrace)) return;
  // UCX 1.13 cancels no send: the peer has not taken the request (a
  // rendezvous-size one), and UCX reads the caller's payload when it does.
  // Returning now would let the caller free it under UCX. The send ends
  // when the peer takes it, or when the peer is found failed (UCX's error,
  // the liveness probe) or fenced off (its node declared lost): its
  // endpoint is then closed by force, which ends the send.
  Log(LogLevel::kWarning,
      "a call to " + Describe(call.rank()) + " timed out while " + Describe(call.rank()) +
          " had not yet taken its request: the call returns once it takes it or once it is "
          "found failed (the process is stopped, or its node frozen or cut off), since until "
          "then UCX may still read the caller's data");
  const std::uint32_t rank = call.rank();
  while (!loop_.WaitFor(completion, kFailedPeerRecheck)) {
    if (loop_.stopping()) {
      // The transport stops: its endpoint goes now, by force. (Should
      // Shutdown's CloseAll have taken it first, its close waits 2 s for a
      // flush, then is left to the worker, which is then never destroyed;
      // the process ends next.)
      endpoints_.Retire(
          rank, Status::Unavailable("the transport of " + Describe(options_.rank) + " shut down"));
      endpoints_.CloseRetired();
      loop_.ProgressUntil([&] { return completion.done.load(); });
      return;
    }
    // The call no longer counts as awaited, so the liveness probe does not
    // look at its peer: look here (a stopped process killed later, on this
    // node, where UCX's keepalive is slow to notice).
    if (options_.peer_alive && !endpoints_.HasFailed(rank) && !options_.peer_alive(rank)) {
      MarkPeerGone(rank);
    }
    endpoints_.CloseIfFailed(rank);
    endpoints_.CloseRetired();
  }
}

// ---- operations a caller waits for: Send, Pull ------------------------------

template <typename StartOperation>
Status Transport::Impl::RunOperation(std::uint32_t rank, std::shared_ptr<UcxEndpoint> endpoint,
                                     std::string_view verb, std::chrono::milliseconds limit,
                                     OperationContext keep, StartOperation&& start) {
  auto completion = std::make_shared<Completion>();
  keep.completion = completion;
  auto* context = new OperationContext(std::move(keep));
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = &Impl::OnOperationComplete;
  param.user_data = context;
  const ucs_status_ptr_t request = start(endpoint->handle(), param, *context);
  // The lease goes now, not after the wait: should the peer be found failed
  // meanwhile, its endpoint's forced close ends this operation.
  endpoint.reset();
  return FinishOperation(request, context, completion, rank, verb, limit);
}

Status Transport::Impl::FinishOperation(ucs_status_ptr_t request, OperationContext* context,
                                        const std::shared_ptr<Completion>& completion,
                                        std::uint32_t rank, std::string_view verb,
                                        std::chrono::milliseconds limit) {
  if (request == nullptr) {
    delete context;
    return Status::Ok();
  }
  if (UCS_PTR_IS_ERR(request)) {
    delete context;
    return FromUcs(UCS_PTR_STATUS(request), "cannot " + std::string(verb) + " " + Describe(rank));
  }
  // In slices: a peer found failed or fenced off meanwhile (its node
  // declared lost) has its endpoint closed by force, which ends the
  // operation now, instead of holding the caller (a node's pulls) to the
  // limit.
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!completion->done.load() && !loop_.stopping()) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    const auto slice =
        std::min(std::chrono::ceil<std::chrono::milliseconds>(deadline - now),
                 std::chrono::duration_cast<std::chrono::milliseconds>(kFailedPeerRecheck));
    if (loop_.WaitFor(*completion, slice)) break;
    if (endpoints_.HasFailed(rank)) {
      endpoints_.CloseIfFailed(rank);
      endpoints_.CloseRetired();
    }
  }
  if (!completion->done.load()) {
    // Cancelling makes UCX call the callback, which frees the request and
    // the context; until then UCX may still touch the caller's buffer.
    // UCX 1.13 cancels no send or get: the request then lives on, and the
    // context keeps what it was given (a pull's destination and key).
    ucp_request_cancel(worker_->handle(), request);
    loop_.ProgressUntil([&] { return completion->done.load(); });
    return Status::Unavailable("cannot " + std::string(verb) + " " + Describe(rank) +
                               ": no completion within " + std::to_string(limit.count()) +
                               " ms: the peer is overloaded or stopped");
  }
  if (!completion->status.ok()) {
    // Ended by the forced close of a failed or fenced peer's endpoint: why.
    const Status failure = endpoints_.FailureOf(rank);
    return (failure.ok() ? completion->status : failure)
        .WithContext("cannot " + std::string(verb) + " " + Describe(rank));
  }
  return Status::Ok();
}

Status Transport::Impl::Send(std::uint32_t rank, std::uint32_t method,
                             std::span<const std::byte> payload) {
  if (InUcxCallback()) return BlockingInCallbackError("Send");
  auto endpoint = endpoints_.For(rank);
  if (!endpoint.ok()) return endpoint.status();
  // A copy the request owns: a send that times out while UCX still reads
  // it (UCX 1.13 cannot cancel a send) must not read the caller's freed
  // payload, or this frame's header, which lived on this stack. Send is for
  // rare, small messages (the cluster view); Post sends without waiting.
  OperationContext keep;
  keep.frame = {.header = EncodeFrameHeader({.kind = FrameKind::kOneWay,
                                             .source_rank = options_.rank,
                                             .method = method,
                                             .request_id = 0,
                                             .token = options_.token}),
                .payload = Bytes(payload.begin(), payload.end())};
  return RunOperation(
      rank, std::move(endpoint).value(), "send to", options_.default_timeout, std::move(keep),
      [](ucp_ep_h handle, const ucp_request_param_t& param, OperationContext& context) {
        return SendActiveMessage(handle, {.header = context.frame.header,
                                          .payload = context.frame.payload,
                                          .on_complete = param.cb.send,
                                          .user_data = param.user_data});
      });
}

Status Transport::Impl::Pull(std::uint32_t rank, std::uint64_t remote_address,
                             std::span<const std::byte> packed_key, void* local, std::size_t length,
                             std::optional<std::chrono::milliseconds> timeout,
                             std::shared_ptr<void> local_owner) {
  if (InUcxCallback()) return BlockingInCallbackError("Pull");
  // A peer that failed or was fenced off is refused here too, before its
  // file could be read.
  auto endpoint = endpoints_.For(rank);
  if (!endpoint.ok()) return endpoint.status();
  auto memory = DecodeMemoryKey(packed_key);
  if (!memory.ok()) return memory.status().WithContext("cannot pull from " + Describe(rank));
  // UCX does not check the range of a get it emulates: the owner would read
  // past its memory (and crash) for a wrong address.
  if (remote_address < memory->address || length > memory->length ||
      remote_address - memory->address > memory->length - length) {
    return Status::InvalidArgument("cannot pull " + std::to_string(length) + " bytes from " +
                                   Describe(rank) +
                                   ": the range is outside the memory it registered");
  }
  if (same_host_reads_.Read(*memory, remote_address, local, length)) return Status::Ok();
  auto unpacked = RemoteKey::Unpack((*endpoint)->handle(), memory->ucx_key);
  if (!unpacked.ok()) return unpacked.status();
  std::shared_ptr<RemoteKey> key = std::move(unpacked).value();
  const ucp_rkey_h key_handle = key->handle();
  return RunOperation(
      rank, std::move(endpoint).value(), "pull from", timeout.value_or(options_.default_timeout),
      {.completion = nullptr,
       .local_memory = std::move(local_owner),
       .remote_key = std::move(key),
       .frame = {}},
      [&](ucp_ep_h handle, const ucp_request_param_t& param, OperationContext&) {
        return ucp_get_nbx(handle, local, length, remote_address, key_handle, &param);
      });
}

// ---- posted messages and replies --------------------------------------------

void Transport::Impl::Post(std::uint32_t rank, std::uint32_t method, Bytes payload,
                           bool send_here) {
  if (loop_.stopping()) return;
  if (send_here && rank != options_.rank && !OnProgressThread() && !InUcxCallback()) {
    const bool sleeping = loop_.progress_thread_sleeping();
    if (sleeping || loop_.progress_thread_parked()) {
      std::vector<PostedMessage> calls;
      {
        // Messages this thread posted before go first.
        std::lock_guard lock(send_mutex_);
        SendPostedLocked(calls);
        TransmitOneWay(rank, method, std::move(payload));
      }
      TransmitHandedOffCalls(std::move(calls));
      // A sleeping progress thread drives what did not complete inline; a
      // parked one leaves that to the thread driving the worker.
      if (sleeping) loop_.Signal();
      return;
    }
  }
  // Posts to this process's own rank skip UCX (DeliverLoopback).
  (rank == options_.rank ? loopback_ : outbox_)
      .Push({.kind = PostedMessage::Kind::kOneWay,
             .rank = rank,
             .method = method,
             .payload = std::move(payload),
             .reply_endpoint = nullptr,
             .reply = {},
             .call = nullptr,
             .call_payload = {}});
  loop_.NoticePosted();
}

bool Transport::Impl::ShouldHandOff() const {
  return !OnProgressThread() && !InUcxCallback() && !loop_.progress_thread_sleeping() &&
         !loop_.stopping();
}

OwnedFrame Transport::Impl::MakeReply(const FrameHeader& header, Result<Bytes> result) const {
  OwnedFrame reply;
  reply.header =
      EncodeFrameHeader({.kind = result.ok() ? FrameKind::kResponse : FrameKind::kErrorResponse,
                         .source_rank = options_.rank,
                         .method = header.method,
                         .request_id = header.request_id,
                         .token = options_.token});
  reply.payload = result.ok() ? std::move(result).value() : EncodeErrorResponse(result.status());
  return reply;
}

void Transport::Impl::SendReply(ucp_ep_h reply_endpoint, const FrameHeader& header,
                                Result<Bytes> result) {
  if (reply_endpoint == nullptr || loop_.stopping()) return;
  OwnedFrame reply = MakeReply(header, std::move(result));
  if (ShouldHandOff()) {
    HandOffReply(PostedMessage::Kind::kReply, header.source_rank, reply_endpoint, std::move(reply));
    return;
  }
  TransmitReply(header.source_rank, reply_endpoint, std::move(reply));
  // A reply sent from outside the progress thread needs the worker woken
  // so that the progress thread drives it.
  if (!OnProgressThread() && !InUcxCallback()) loop_.Signal();
}

void Transport::Impl::HandOffReply(PostedMessage::Kind kind, std::uint32_t rank,
                                   ucp_ep_h request_endpoint, OwnedFrame reply) {
  outbox_.Push({.kind = kind,
                .rank = rank,
                .method = 0,
                .payload = {},
                .reply_endpoint = request_endpoint,
                .reply = std::move(reply),
                .call = nullptr,
                .call_payload = {}});
  loop_.NoticePosted();
}

void Transport::Impl::SendLateReply(ucp_ep_h request_endpoint, const FrameHeader& header,
                                    Result<Bytes> result) {
  // No endpoint: a request this process made to itself, answered as
  // SendReply answers it.
  if (request_endpoint == nullptr || loop_.stopping()) return;
  OwnedFrame reply = MakeReply(header, std::move(result));
  // Connecting to the requester inside a UCX callback would re-enter UCX.
  if (ShouldHandOff() || InUcxCallback()) {
    HandOffReply(PostedMessage::Kind::kLateReply, header.source_rank, request_endpoint,
                 std::move(reply));
    return;
  }
  TransmitLateReply(header.source_rank, request_endpoint, std::move(reply));
  if (!OnProgressThread()) loop_.Signal();
}

bool Transport::Impl::SendPosted() {
  const bool delivered = DeliverLoopback();
  if (!outbox_.HasMessages()) return delivered;
  std::vector<PostedMessage> calls;
  bool sent = false;
  {
    std::lock_guard lock(send_mutex_);
    sent = SendPostedLocked(calls);
  }
  TransmitHandedOffCalls(std::move(calls));
  return sent || delivered;
}

bool Transport::Impl::DeliverLoopback() {
  if (!loopback_.HasMessages()) return false;
  std::lock_guard lock(loopback_mutex_);
  auto messages = loopback_.TakeAll();
  if (messages.empty()) return false;
  // As a UCX callback would run them: handlers must not block here either.
  const CallbackScope scope;
  FrameHeader header{};
  header.kind = FrameKind::kOneWay;
  header.source_rank = options_.rank;
  for (auto& message : messages) {
    header.method = message.method;
    DeliverFrame(header, nullptr, message.payload);
  }
  return true;
}

bool Transport::Impl::SendPostedLocked(std::vector<PostedMessage>& calls) {
  auto messages = outbox_.TakeAll();
  if (messages.empty()) return false;
  // Calls out, the rest kept in order; a turn without calls moves nothing.
  auto kept = messages.begin();
  for (auto& message : messages) {
    if (message.kind == PostedMessage::Kind::kCall) {
      calls.push_back(std::move(message));
    } else {
      if (&*kept != &message) *kept = std::move(message);
      ++kept;
    }
  }
  messages.erase(kept, messages.end());
  SendAsFrames(std::move(messages), *this);
  return true;
}

void Transport::Impl::SendOwnedFrame(ucp_ep_h endpoint, OwnedFrame frame) {
  auto* context = new SendContext{this, nullptr, std::move(frame)};
  const ucs_status_ptr_t request = StartTrackedSend(endpoint, {.header = context->frame.header,
                                                               .payload = context->frame.payload,
                                                               .on_complete = &Impl::OnSendComplete,
                                                               .user_data = context});
  if (request == nullptr || UCS_PTR_IS_ERR(request)) delete context;
}

void Transport::Impl::TransmitReply(std::uint32_t rank, ucp_ep_h reply_endpoint, OwnedFrame reply) {
  (void)endpoints_.UnlessClosed(rank, [&] { SendOwnedFrame(reply_endpoint, std::move(reply)); });
}

void Transport::Impl::TransmitLateReply(std::uint32_t rank, ucp_ep_h request_endpoint,
                                        OwnedFrame reply) {
  auto endpoint = endpoints_.For(rank);
  if (!endpoint.ok()) {
    // Failed, fenced off, or this transport is closing: nobody waits for
    // the answer, and the request's endpoint may be freed already. Only a
    // requester that this process has no address for (not a failed
    // connect) and does not know to have ended is answered on it: a worker
    // that ended leaves its node's address book.
    const bool unknown_here = endpoint.status().code() == StatusCode::kNotFound &&
                              (!options_.resolve_address || !options_.resolve_address(rank).ok()) &&
                              (!options_.peer_alive || options_.peer_alive(rank));
    if (unknown_here) {
      late_replies_on_request_endpoint_.fetch_add(1, std::memory_order_relaxed);
      TransmitReply(rank, request_endpoint, std::move(reply));
    } else {
      late_replies_dropped_.fetch_add(1, std::memory_order_relaxed);
    }
    return;
  }
  late_replies_on_own_endpoint_.fetch_add(1, std::memory_order_relaxed);
  SendOwnedFrame((*endpoint)->handle(), std::move(reply));
}

void Transport::Impl::TransmitOneWay(std::uint32_t rank, std::uint32_t method, Bytes payload) {
  TransmitFrame(rank, FrameKind::kOneWay, method, std::move(payload));
}

void Transport::Impl::TransmitBatch(std::uint32_t rank, Bytes batch) {
  TransmitFrame(rank, FrameKind::kBatch, 0, std::move(batch));
}

void Transport::Impl::TransmitFrame(std::uint32_t rank, FrameKind kind, std::uint32_t method,
                                    Bytes payload) {
  auto endpoint = endpoints_.For(rank);
  if (!endpoint.ok()) return;  // the peer is gone or unknown: dropped
  SendOwnedFrame((*endpoint)->handle(), {.header = EncodeFrameHeader({.kind = kind,
                                                                      .source_rank = options_.rank,
                                                                      .method = method,
                                                                      .request_id = 0,
                                                                      .token = options_.token}),
                                         .payload = std::move(payload)});
}

// ---- the progress thread's other work ---------------------------------------

void Transport::Impl::Housekeeping(std::chrono::steady_clock::time_point now) {
  endpoints_.CloseRetired();
  ExpireAsyncCalls(now);
  ProbeAwaitedPeers(now);
  CloseEndpointsOfStuckSends(now);
  same_host_reads_.DropIdle(now);
  receive_buffers_.DropIdle(now);
  RepairStalledSlots(now);
  HandBackMemoryAfterBursts(now);
}

void Transport::Impl::HandBackMemoryAfterBursts(std::chrono::steady_clock::time_point now) {
  switch (burst_end_watch_.Observe(now, requests_served_.load(std::memory_order_relaxed))) {
    case BurstEndWatch::Moment::kNothing: return;
    case BurstEndWatch::Moment::kBurstEnded: {
      // This thread's cache holds blocks of the messages it handled (not of
      // those a thread that drove the worker itself handled: docs/ARCHITECTURE.md,
      // "Allocator").
      ReturnThisThreadsCachedMemory();
      {
        std::lock_guard lock(burst_end_handler_mutex_);
        if (burst_end_handler_) burst_end_handler_();
      }
      BlockPool::ReleaseAllEmptyChunks();
      DecayFreedMemory();
      return;
    }
    case BurstEndWatch::Moment::kQuiet: DecayFreedMemory(); return;
  }
}

void Transport::Impl::RepairStalledSlots(std::chrono::steady_clock::time_point now) {
  if (!stalled_slot_repair_ || now - last_stalled_slot_check_ < kStalledSlotCheckInterval) return;
  last_stalled_slot_check_ = now;
  stalled_slot_repair_->Check(now);
}

void Transport::Impl::Fence(std::uint32_t first, std::uint32_t last, const Status& cause) {
  endpoints_.Fence(first, last, cause);
  // A call that passed the fence just before it went up and registered
  // after this sweep is failed by the next liveness probe.
  for (const std::uint32_t rank : pending_calls_.AwaitedRanks()) {
    if (rank >= first && rank <= last) FailCallsToFenced(rank, cause);
  }
}

void Transport::Impl::FailCallsToFenced(std::uint32_t rank, const Status& cause) {
  const auto now = std::chrono::steady_clock::now();
  for (auto& call : pending_calls_.TakeCallsTo(rank)) {
    call->Complete(cause);
    // A call completes once its send is over too (pending_calls.h).
    if (call->sent()) continue;
    std::lock_guard lock(stuck_sends_mutex_);
    stuck_sends_.push_back({.call = call, .rank = rank, .since = now});
    stuck_sends_waiting_.store(true, std::memory_order_relaxed);
  }
}

void Transport::Impl::CloseEndpointsOfStuckSends(std::chrono::steady_clock::time_point now) {
  if (!stuck_sends_waiting_.load(std::memory_order_relaxed)) return;
  std::vector<std::uint32_t> ranks;
  {
    std::lock_guard lock(stuck_sends_mutex_);
    std::erase_if(stuck_sends_, [&](const StuckSend& stuck) {
      const auto call = stuck.call.lock();
      if (!call || call->sent()) return true;
      if (now - stuck.since < kSendAfterTimeoutGrace) return false;
      ranks.push_back(stuck.rank);
      return true;
    });
    stuck_sends_waiting_.store(!stuck_sends_.empty(), std::memory_order_relaxed);
  }
  for (const std::uint32_t rank : ranks) endpoints_.CloseIfFailed(rank);
  if (!ranks.empty()) endpoints_.CloseRetired();
}

void Transport::Impl::ProbeAwaitedPeers(std::chrono::steady_clock::time_point now) {
  if (now - last_liveness_probe_ < kLivenessInterval) return;
  last_liveness_probe_ = now;
  for (const std::uint32_t rank : pending_calls_.AwaitedRanks()) {
    if (const Status fence = endpoints_.FenceOf(rank); !fence.ok()) {
      FailCallsToFenced(rank, fence);
      continue;
    }
    if (!options_.peer_alive || options_.peer_alive(rank)) continue;
    MarkPeerGone(rank);
  }
}

void Transport::Impl::MarkPeerGone(std::uint32_t rank) {
  // What the calls' callbacks and the failure handler run must not block,
  // as in a UCX callback.
  const CallbackScope scope;
  const Status failure = endpoints_.PeerFailure(rank, "its process is gone");
  endpoints_.MarkFailed(rank, failure);
  pending_calls_.FailCallsTo(rank, failure);
  NotifyPeerFailure(rank, failure);
}

void Transport::Impl::SetBurstEndHandler(std::function<void()> handler) {
  std::lock_guard lock(burst_end_handler_mutex_);
  burst_end_handler_ = std::move(handler);
}

void Transport::Impl::SetPeerFailureHandler(std::function<void(std::uint32_t, const Status&)> handler) {
  std::lock_guard lock(failure_handler_mutex_);
  failure_handler_ = std::make_shared<const std::function<void(std::uint32_t, const Status&)>>(std::move(handler));
}

void Transport::Impl::NotifyPeerFailure(std::uint32_t rank, const Status& failure) {
  std::shared_ptr<const std::function<void(std::uint32_t, const Status&)>> handler;
  {
    std::lock_guard lock(failure_handler_mutex_);
    handler = failure_handler_;
  }
  if (handler && *handler) (*handler)(rank, failure);
}

// ---- send callbacks (never throw) -------------------------------------------

ucs_status_ptr_t Transport::Impl::StartTrackedSend(ucp_ep_h endpoint,
                                                   const ActiveMessageSend& send) {
  const ucs_status_ptr_t request = SendActiveMessage(endpoint, send);
  // Counted only when it did not complete at once, so that the small sends
  // of the latency path touch no shared counter. Its callback may run on the
  // progress thread before this increment: the count can dip below zero for
  // a moment; Shutdown reads it once that thread has stopped.
  if (request != nullptr && !UCS_PTR_IS_ERR(request)) sends_in_progress_.fetch_add(1);
  return request;
}

void Transport::Impl::OnSendComplete(void* request, ucs_status_t status, void* user_data) noexcept {
  CallbackScope scope;
  auto* context = static_cast<SendContext*>(user_data);
  Impl* impl = context->impl;
  if (context->call) {
    const Status sent = status == UCS_OK ? Status::Ok()
                                         : impl->endpoints_.PeerFailure(context->call->rank(),
                                                                        ucs_status_string(status));
    context->call->MarkSent(sent);
    if (!sent.ok()) impl->FailCall(context->call->id(), sent);
  }
  delete context;
  ucp_request_free(request);
  impl->sends_in_progress_.fetch_sub(1);  // last: Shutdown reads it
}

void Transport::Impl::OnOperationComplete(void* request, ucs_status_t status,
                                          void* user_data) noexcept {
  CallbackScope scope;
  auto* context = static_cast<OperationContext*>(user_data);
  context->completion->Finish(FromUcs(status, "operation failed"));
  delete context;
  ucp_request_free(request);
}

// ---- Transport --------------------------------------------------------------

Result<std::unique_ptr<Transport>> Transport::Create(TransportOptions options) {
  auto context = UcxContext::Create(options.keepalive_interval);
  if (!context.ok()) return context.status();
  auto worker = UcxWorker::Create(*context);
  if (!worker.ok()) return worker.status();
  return Create(std::move(options), *worker);
}

Result<std::unique_ptr<Transport>> Transport::Create(TransportOptions options,
                                                     std::shared_ptr<UcxWorker> worker) {
  auto impl = std::make_unique<Impl>(std::move(options), std::move(worker));
  SRAY_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<Transport>(new Transport(std::move(impl)));
}

Transport::Transport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Transport::~Transport() = default;

std::uint32_t Transport::rank() const {
  return impl_->rank();
}
Result<Bytes> Transport::LocalAddress(bool network_only) const {
  return impl_->LocalAddress(network_only);
}
void Transport::NotePeerGone() {
  impl_->NotePeerGone();
}
void Transport::SetBurstEndHandler(std::function<void()> handler) {
  impl_->SetBurstEndHandler(std::move(handler));
}

void Transport::SetPeerFailureHandler(std::function<void(std::uint32_t, const Status&)> handler) {
  impl_->SetPeerFailureHandler(std::move(handler));
}
bool Transport::PeerFailed(std::uint32_t rank) const {
  return impl_->PeerFailed(rank);
}
void Transport::Fence(std::uint32_t first, std::uint32_t last, const Status& cause) {
  impl_->Fence(first, last, cause);
}
void Transport::RegisterRequestHandler(std::uint32_t method, RequestHandler handler) {
  impl_->RegisterRequestHandler(method, std::move(handler));
}
void Transport::RegisterOneWayHandler(std::uint32_t method, OneWayHandler handler) {
  impl_->RegisterOneWayHandler(method, std::move(handler));
}
void Transport::RegisterDeferredRequestHandler(std::uint32_t method,
                                               DeferredRequestHandler handler) {
  impl_->RegisterDeferredRequestHandler(method, std::move(handler));
}
bool Transport::ProgressHere(const std::function<bool()>& done, std::chrono::microseconds spin) {
  return impl_->ProgressHere(done, spin);
}
void Transport::Post(std::uint32_t rank, std::uint32_t method, Bytes payload, bool send_here) {
  impl_->Post(rank, method, std::move(payload), send_here);
}
Result<Bytes> Transport::Call(std::uint32_t rank, std::uint32_t method,
                              std::span<const std::byte> payload,
                              std::optional<std::chrono::milliseconds> timeout) {
  return impl_->Call(rank, method, payload, timeout);
}
void Transport::CallAsync(std::uint32_t rank, std::uint32_t method,
                          std::span<const std::byte> payload,
                          std::function<void(Result<Bytes>)> done,
                          std::optional<std::chrono::milliseconds> timeout) {
  impl_->CallAsync(rank, method, payload, std::move(done), timeout);
}
Status Transport::Send(std::uint32_t rank, std::uint32_t method,
                       std::span<const std::byte> payload) {
  return impl_->Send(rank, method, payload);
}
Result<std::unique_ptr<RegisteredMemory>> Transport::Register(
    void* address, std::size_t length, const std::optional<SharedFileRegion>& file) {
  return impl_->Register(address, length, file);
}
Status Transport::Pull(std::uint32_t rank, std::uint64_t remote_address,
                       std::span<const std::byte> packed_key, void* local, std::size_t length,
                       std::optional<std::chrono::milliseconds> timeout,
                       std::shared_ptr<void> local_owner) {
  return impl_->Pull(rank, remote_address, packed_key, local, length, timeout,
                     std::move(local_owner));
}
TransportStatistics Transport::statistics() const {
  return impl_->statistics();
}

void Responder::State::Send(Result<Bytes> result) {
  if (InItsHandler()) {
    impl->SendReply(reply_endpoint, header, std::move(result));
  } else {
    impl->SendLateReply(reply_endpoint, header, std::move(result));
  }
}

Responder::State::~State() {
  if (!answered.exchange(true)) Send(Status::Internal("the request was dropped without an answer"));
}

void Responder::Reply(Result<Bytes> result) const {
  if (state_->answered.exchange(true)) return;
  state_->Send(std::move(result));
}

}  // namespace sray::transport
