// Transport: what arrives. Every frame is checked (header, job token)
// before a byte of it is trusted, then delivered: requests and one-way
// messages to their handlers, replies to the calls that wait for them.
// Runs inside UCX callbacks, on whichever thread progresses the worker.

#include "transport/message_batch.h"
#include "transport/transport_impl.h"

namespace sray::transport {
namespace {

std::span<const std::byte> AsBytes(const void* data, std::size_t length) {
  return {static_cast<const std::byte*>(data), length};
}

}  // namespace

ucs_status_t Transport::Impl::OnSkippedSlot(void* arg, const void* /*header*/,
                                            std::size_t header_length, void* /*data*/,
                                            std::size_t length,
                                            const ucp_am_recv_param_t* /*param*/) noexcept {
  // Counted only as StalledSlotRepair writes them: nothing, no header.
  if (header_length == 0 && length == 0)
    static_cast<Impl*>(arg)->skipped_slot_messages_.fetch_add(1);
  return UCS_OK;
}

ucs_status_t Transport::Impl::OnActiveMessage(void* arg, const void* header,
                                              std::size_t header_length, void* data,
                                              std::size_t length,
                                              const ucp_am_recv_param_t* param) noexcept {
  CallbackScope scope;
  auto* impl = static_cast<Impl*>(arg);
  // Shutting down: nothing more is served or received (a rendezvous
  // receive started now could outlive the worker). UCX drops the message.
  if (impl->loop_.stopping()) {
    impl->arrived_during_shutdown_.fetch_add(1);
    return UCS_OK;
  }
  const ucp_ep_h reply_endpoint =
      (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) != 0 ? param->reply_ep : nullptr;
  auto decoded = DecodeFrameHeader(AsBytes(header, header_length));
  if (!decoded.ok()) {
    // Dropped unread, and never answered: a peer that cannot prove it
    // belongs to the job learns nothing, not even an error text.
    impl->malformed_frames_.fetch_add(1);
    return UCS_OK;
  }
  if (!TokensMatch(impl->options_.token, decoded->token)) {
    impl->rejected_frames_.fetch_add(1);
    return UCS_OK;
  }
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) == 0) {
    impl->DeliverFrame(*decoded, reply_endpoint, AsBytes(data, length));
    return UCS_OK;
  }
  // Rendezvous: the data is still at the sender; fetch it into a buffer.
  try {
    auto* incoming = new IncomingRendezvous{impl, *decoded, reply_endpoint,
                                            impl->receive_buffers_.Acquire(length), length};
    ucp_request_param_t receive{};
    receive.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    receive.cb.recv_am = &Impl::OnRendezvousData;
    receive.user_data = incoming;
    impl->rendezvous_in_progress_.fetch_add(1);
    const ucs_status_ptr_t request = ucp_am_recv_data_nbx(
        impl->worker_->handle(), data, incoming->buffer.data(), length, &receive);
    if (request == nullptr || UCS_PTR_IS_ERR(request)) impl->rendezvous_in_progress_.fetch_sub(1);
    if (request == nullptr) {
      impl->DeliverFrame(incoming->header, reply_endpoint,
                         std::span(incoming->buffer.data(), length));
      impl->receive_buffers_.Release(std::move(incoming->buffer));
      delete incoming;
    } else if (UCS_PTR_IS_ERR(request)) {
      impl->receive_buffers_.Release(std::move(incoming->buffer));
      delete incoming;
    }
  } catch (const std::bad_alloc&) {
    // Returning an error rejects the message; the sender's send fails.
    return UCS_ERR_NO_MEMORY;
  }
  return UCS_INPROGRESS;
}

void Transport::Impl::OnRendezvousData(void* request, ucs_status_t status, std::size_t /*length*/,
                                       void* user_data) noexcept {
  CallbackScope scope;
  auto* incoming = static_cast<IncomingRendezvous*>(user_data);
  Impl* impl = incoming->impl;
  // Data that completes once the shutdown began is not served either.
  if (status == UCS_OK && !impl->loop_.stopping()) {
    impl->DeliverFrame(incoming->header, incoming->reply_endpoint,
                       std::span(incoming->buffer.data(), incoming->length));
  }
  impl->receive_buffers_.Release(std::move(incoming->buffer));
  delete incoming;
  ucp_request_free(request);
  // Last: Shutdown destroys the worker once this reaches zero.
  impl->rendezvous_in_progress_.fetch_sub(1);
}

void Transport::Impl::DeliverFrame(const FrameHeader& header, ucp_ep_h reply_endpoint,
                                   std::span<const std::byte> payload) noexcept {
  try {
    if (const Status fence = endpoints_.FenceOf(header.source_rank); !fence.ok()) {
      // Out of the job: it acts on nothing here, and a request learns why.
      if (header.kind == FrameKind::kRequest) {
        SendReply(reply_endpoint, header, Status::PermissionDenied(fence.message()));
      }
      return;
    }
    switch (header.kind) {
      case FrameKind::kRequest: ServeRequest(header, reply_endpoint, payload); break;
      case FrameKind::kResponse:
        (void)pending_calls_.CompleteReplyFrom(header.source_rank, header.request_id,
                                               Bytes(payload.begin(), payload.end()));
        break;
      case FrameKind::kErrorResponse:
        (void)pending_calls_.CompleteReplyFrom(header.source_rank, header.request_id,
                                               DecodeErrorResponse(payload));
        break;
      case FrameKind::kOneWay: ServeOneWay(header, payload); break;
      case FrameKind::kBatch: ServeBatch(header, payload); break;
    }
  } catch (const std::exception&) {
    // A handler threw through its Result contract, or memory ran out; the
    // caller then sees its timeout rather than a crashed process.
  }
}

void Transport::Impl::ServeRequest(const FrameHeader& header, ucp_ep_h reply_endpoint,
                                   std::span<const std::byte> payload) {
  // Built only when needed: describing a rank may ask PMIx, which costs
  // more than serving a small request.
  std::optional<Result<Bytes>> result;
  {
    std::shared_lock lock(handlers_mutex_);
    auto deferred = deferred_handlers_.find(header.method);
    if (deferred != deferred_handlers_.end()) {
      auto handler = deferred->second;
      lock.unlock();
      requests_served_.fetch_add(1);
      auto state = std::make_shared<Responder::State>();
      state->impl = this;
      state->reply_endpoint = reply_endpoint;
      state->header = header;
      state->handler_thread = std::this_thread::get_id();
      // Set however the handler ends, if it kept a copy to answer with
      // later; without one the answer was given (or the request dropped)
      // inside the handler's call.
      struct MarkReturned {
        std::weak_ptr<Responder::State> state;
        ~MarkReturned() {
          if (auto kept = state.lock()) kept->handler_returned.store(true);
        }
      } mark_returned{state};
      handler(header.source_rank, payload, Responder(std::move(state)));
      return;
    }
    auto found = request_handlers_.find(header.method);
    if (found != request_handlers_.end()) {
      lock.unlock();
      try {
        result = found->second(header.source_rank, payload);
      } catch (const std::exception& error) {
        // Answered at once: the caller would otherwise wait out its
        // timeout (a minute by default) for a reply that never comes.
        result = Status::Internal("the handler of method " + std::to_string(header.method) +
                                  " on " + Describe(options_.rank) + " failed: " + error.what());
      }
    }
  }
  if (!result) {
    result = Status::NotFound("no handler for method " + std::to_string(header.method) + " on " +
                              Describe(options_.rank));
  }
  requests_served_.fetch_add(1);
  SendReply(reply_endpoint, header, std::move(*result));
}

void Transport::Impl::ServeBatch(const FrameHeader& header, std::span<const std::byte> payload) {
  FrameHeader single = header;
  single.kind = FrameKind::kOneWay;
  const Status delivered =
      ForEachBatchedMessage(payload, [&](std::uint32_t method, std::span<const std::byte> message) {
        single.method = method;
        ServeOneWay(single, message);
      });
  if (delivered.ok()) {
    batches_received_.fetch_add(1);
  } else {
    malformed_frames_.fetch_add(1);
  }
}

void Transport::Impl::ServeOneWay(const FrameHeader& header, std::span<const std::byte> payload) {
  std::shared_lock lock(handlers_mutex_);
  auto found = one_way_handlers_.find(header.method);
  if (found == one_way_handlers_.end()) return;
  lock.unlock();
  found->second(header.source_rank, payload);
  requests_served_.fetch_add(1);
}

}  // namespace sray::transport
