#pragma once

// Several one-way messages to one peer in one frame (FrameKind::kBatch).
// The progress thread sends what callers posted since its last turn; when
// several small messages wait for the same peer, one frame carries them:
// over TCP each frame costs a system call on both sides and a trip through
// the kernel's network stack, which was most of a node manager's time when
// it forwarded tasks one frame each.
//
// Layout of the payload: per message, method u32 | length u32 (little
// endian) | the message's bytes. Messages keep their order.
//
// Thread-safety: a MessageBatch belongs to one thread; ForEachBatchedMessage
// is a pure function.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "common/status.h"
#include "transport/bytes.h"

namespace sray::transport {

// Messages up to this size may join a batch; larger ones go alone (copying
// them would cost more than the frame saves).
inline constexpr std::size_t kBatchableMessageLimit = 4096;
// A batch is sent once it holds this many bytes, staying well inside UCX's
// eager protocol.
inline constexpr std::size_t kBatchBytesLimit = 16384;
inline constexpr std::size_t kBatchEntryHeaderSize = 8;

class MessageBatch {
 public:
  void Append(std::uint32_t method, std::span<const std::byte> payload);
  [[nodiscard]] std::size_t count() const { return count_; }
  [[nodiscard]] std::size_t size_bytes() const { return bytes_.size(); }
  // Hands the encoded payload over and starts empty again.
  Bytes Take();

 private:
  Bytes bytes_;
  std::size_t count_ = 0;
};

// Calls `deliver` for each message of a batch payload, in order. A payload
// that is truncated or whose lengths do not add up fails with
// InvalidArgument before any message is delivered.
Status ForEachBatchedMessage(
    std::span<const std::byte> payload,
    const std::function<void(std::uint32_t method, std::span<const std::byte> message)>& deliver);

}  // namespace sray::transport
