#include "transport/outbox.h"

#include "transport/message_batch.h"

namespace sray::transport {
namespace {

// Messages for one peer gathered in one turn. The first is held as it is,
// so a lone message is sent without a copy.
struct OutgoingBatch {
  std::uint32_t rank = 0;
  bool holds_first = false;
  std::uint32_t first_method = 0;
  Bytes first_payload;
  MessageBatch batch;

  void Add(std::uint32_t method, Bytes payload) {
    if (!holds_first && batch.count() == 0) {
      holds_first = true;
      first_method = method;
      first_payload = std::move(payload);
      return;
    }
    if (holds_first) {
      batch.Append(first_method, first_payload);
      holds_first = false;
      first_payload.clear();
    }
    batch.Append(method, payload);
  }

  void Flush(FrameSink& sink) {
    if (holds_first) {
      holds_first = false;
      sink.TransmitOneWay(rank, first_method, std::move(first_payload));
      first_payload = Bytes();
    } else if (batch.count() > 0) {
      sink.TransmitBatch(rank, batch.Take());
    }
  }
};

}  // namespace

void Outbox::Push(PostedMessage message) {
  std::lock_guard lock(mutex_);
  messages_.push_back(std::move(message));
  filled_.store(true);  // seq_cst: pairs with the progress loop's sleeping flag
}

std::vector<PostedMessage> Outbox::TakeAll() {
  std::vector<PostedMessage> taken;
  if (!filled_.load(std::memory_order_acquire)) return taken;
  std::lock_guard lock(mutex_);
  filled_.store(false, std::memory_order_relaxed);
  taken.swap(messages_);
  return taken;
}

void SendAsFrames(std::vector<PostedMessage> messages, FrameSink& sink) {
  // Few peers per turn: a vector.
  std::vector<OutgoingBatch> open;
  auto open_for = [&](std::uint32_t rank) -> OutgoingBatch* {
    for (auto& outgoing : open) {
      if (outgoing.rank == rank) return &outgoing;
    }
    return nullptr;
  };
  for (auto& message : messages) {
    if (message.kind == PostedMessage::Kind::kReply) {
      sink.TransmitReply(message.rank, message.reply_endpoint, std::move(message.reply));
      continue;
    }
    if (message.kind == PostedMessage::Kind::kLateReply) {
      // On the endpoint the messages posted to that rank go by: after them.
      if (OutgoingBatch* outgoing = open_for(message.rank)) outgoing->Flush(sink);
      sink.TransmitLateReply(message.rank, message.reply_endpoint, std::move(message.reply));
      continue;
    }
    OutgoingBatch* outgoing = open_for(message.rank);
    if (message.payload.size() > kBatchableMessageLimit) {
      if (outgoing != nullptr) outgoing->Flush(sink);
      sink.TransmitOneWay(message.rank, message.method, std::move(message.payload));
      continue;
    }
    if (outgoing == nullptr) {
      outgoing = &open.emplace_back();
      outgoing->rank = message.rank;
    }
    outgoing->Add(message.method, std::move(message.payload));
    if (outgoing->batch.size_bytes() >= kBatchBytesLimit) outgoing->Flush(sink);
  }
  for (auto& outgoing : open) outgoing.Flush(sink);
}

}  // namespace sray::transport
