#pragma once

// The fixed header sray puts on every active message. It travels as the UCX
// AM header; the payload travels as AM data (eager or rendezvous, as UCX
// chooses). Encoding is explicit little-endian so peers never depend on
// struct layout, and decoding validates everything before a byte is trusted.
//
// Thread-safety: pure functions.

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "common/status.h"
#include "transport/bytes.h"

namespace sray::transport {

inline constexpr std::uint32_t kFrameMagic = 0x59415253;  // "SRAY" in little-endian bytes
inline constexpr std::uint8_t kFrameVersion = 1;
inline constexpr std::size_t kJobTokenSize = 16;
inline constexpr std::size_t kFrameHeaderSize = 40;

enum class FrameKind : std::uint8_t {
  kRequest = 1,        // expects a kResponse or kErrorResponse with the same request id
  kResponse = 2,       // payload: the handler's result
  kErrorResponse = 3,  // payload: one status-code byte, then the message text
  kOneWay = 4,         // no reply
  kBatch = 5,          // several one-way messages to one peer (transport/message_batch.h)
};

using JobToken = std::array<std::byte, kJobTokenSize>;

struct FrameHeader {
  FrameKind kind = FrameKind::kRequest;
  std::uint32_t source_rank = 0;
  std::uint32_t method = 0;
  std::uint64_t request_id = 0;
  // Proof that the sender belongs to the job: derived from the job secret.
  JobToken token{};
};

using EncodedFrameHeader = std::array<std::byte, kFrameHeaderSize>;

EncodedFrameHeader EncodeFrameHeader(const FrameHeader& header);

// A frame that owns its bytes: what a send hands to UCX, which may read them
// until it reports the send complete.
struct OwnedFrame {
  EncodedFrameHeader header{};
  Bytes payload;
};

// Fails with InvalidArgument naming what is wrong: truncated, bad magic,
// unknown version or kind.
Result<FrameHeader> DecodeFrameHeader(std::span<const std::byte> bytes);

// Compares tokens in time independent of where they differ.
bool TokensMatch(const JobToken& expected, const JobToken& received);

// The payload of a kErrorResponse frame: the status code (one byte), then
// its message. Decoding never gives an ok status: an unknown code or
// an empty payload reads as Internal.
Bytes EncodeErrorResponse(const Status& status);
Status DecodeErrorResponse(std::span<const std::byte> payload);

}  // namespace sray::transport
