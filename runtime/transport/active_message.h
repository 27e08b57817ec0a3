#pragma once

// The one way sray puts a frame on the wire: a UCX active message whose AM
// header is the frame header and whose data is the payload.
//
// Thread-safety: as UCX's (the worker is UCS_THREAD_MODE_MULTI).

#include <ucp/api/ucp.h>

#include <cstddef>
#include <span>

namespace sray::transport {

// The one UCX active-message id sray uses; FrameHeader::kind and ::method
// say what a message is.
inline constexpr unsigned kActiveMessageId = 7;
// An empty message put in place of one a killed sender left half-written in
// a shared-memory receive queue (shared_memory_fifos.h); ignored.
inline constexpr unsigned kSkippedSlotMessageId = 8;

struct ActiveMessageSend {
  std::span<const std::byte> header;
  std::span<const std::byte> payload;
  // Runs when the send completes later (not when it completes inline or
  // fails at once); it must free the request with ucp_request_free.
  ucp_send_nbx_callback_t on_complete = nullptr;
  void* user_data = nullptr;
  // Lets the receiver answer on the endpoint the message came by (requests).
  bool reply_endpoint_wanted = false;
};

// Returns what ucp_am_send_nbx returns: null when the send completed
// inline, an error pointer (UCS_PTR_IS_ERR) when it failed at once (the
// callback then never runs), else the request in flight.
ucs_status_ptr_t SendActiveMessage(ucp_ep_h endpoint, const ActiveMessageSend& send);

}  // namespace sray::transport
