#pragma once

// Messages posted for the progress thread to send, and how a turn's worth of
// them becomes frames.
//
// Post (and a reply from a thread that must not send itself) puts a message
// in the Outbox and returns at once; whoever sends next (the progress
// thread, or a thread driving the worker) takes everything with TakeAll and
// hands it to SendAsFrames: small one-way messages to one peer share a
// kBatch frame (transport/message_batch.h), each peer's messages keep their
// order, replies go out as they come.
//
// Thread-safety: Outbox's members may be called from any thread.
// SendAsFrames is a pure function of its input that calls the sink.

#include <ucp/api/ucp.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "transport/bytes.h"
#include "transport/frame.h"
#include "transport/pending_calls.h"

namespace sray::transport {

struct PostedMessage {
  // kReply goes on the endpoint its request came by, which is valid only
  // while that request's handler runs: UCX may free an endpoint it made
  // itself once the requester dies. kLateReply, an answer given after the
  // handler returned, goes on this process's own endpoint to the requester,
  // and on the request's endpoint only when the requester's address is
  // unknown here.
  enum class Kind : std::uint8_t { kOneWay, kReply, kLateReply, kCall };
  Kind kind = Kind::kOneWay;
  // To whom (replies: the rank their request came from); kOneWay: what.
  std::uint32_t rank = 0;
  std::uint32_t method = 0;
  Bytes payload;
  // Replies: the encoded reply, and the endpoint its request came by.
  ucp_ep_h reply_endpoint = nullptr;
  OwnedFrame reply;
  // kCall: a request already registered as pending, and its payload, which
  // the caller keeps valid until the call is done (not copied). Sent by the
  // transport itself, after the turn's other messages.
  std::shared_ptr<PendingCall> call;
  std::span<const std::byte> call_payload;
};

class Outbox {
 public:
  void Push(PostedMessage message);
  // True while messages may be waiting: a lock-free look for the progress
  // loop. Set (sequentially consistent) after a message is in, so a thread
  // that announces it sleeps and then looks cannot miss one.
  [[nodiscard]] bool HasMessages() const { return filled_.load(); }
  std::vector<PostedMessage> TakeAll();

 private:
  std::mutex mutex_;
  std::vector<PostedMessage> messages_;  // guarded by mutex_
  std::atomic<bool> filled_{false};
};

// Where SendAsFrames puts the frames, in the order they must go.
class FrameSink {
 public:
  virtual ~FrameSink() = default;
  // `rank`: whom the reply is for (its request's source).
  virtual void TransmitReply(std::uint32_t rank, ucp_ep_h reply_endpoint, OwnedFrame reply) = 0;
  virtual void TransmitLateReply(std::uint32_t rank, ucp_ep_h request_endpoint,
                                 OwnedFrame reply) = 0;
  virtual void TransmitOneWay(std::uint32_t rank, std::uint32_t method, Bytes payload) = 0;
  virtual void TransmitBatch(std::uint32_t rank, Bytes batch) = 0;
};

// Turns one turn's messages (one-way messages and replies; the caller takes
// the calls out first) into frames: a lone message goes as it is (without a
// copy), several small ones to one peer as batches of up to kBatchBytesLimit,
// one above kBatchableMessageLimit alone after the messages posted to that
// peer before it.
void SendAsFrames(std::vector<PostedMessage> messages, FrameSink& sink);

}  // namespace sray::transport
