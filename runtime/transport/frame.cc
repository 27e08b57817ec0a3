#include "transport/frame.h"

#include <cstring>
#include <string>

namespace sray::transport {
namespace {

template <typename Integer>
void Store(std::byte* out, Integer value) {
  for (std::size_t i = 0; i < sizeof(Integer); ++i) {
    out[i] = static_cast<std::byte>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xFFU);
  }
}

template <typename Integer>
Integer Load(const std::byte* in) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < sizeof(Integer); ++i) {
    value |= static_cast<std::uint64_t>(std::to_integer<std::uint8_t>(in[i])) << (8 * i);
  }
  return static_cast<Integer>(value);
}

// Layout: magic u32 | version u8 | kind u8 | reserved u16 | source u32 |
//         method u32 | request id u64 | token 16 bytes
constexpr std::size_t kMagicOffset = 0;
constexpr std::size_t kVersionOffset = 4;
constexpr std::size_t kKindOffset = 5;
constexpr std::size_t kSourceOffset = 8;
constexpr std::size_t kMethodOffset = 12;
constexpr std::size_t kRequestIdOffset = 16;
constexpr std::size_t kTokenOffset = 24;
static_assert(kTokenOffset + kJobTokenSize == kFrameHeaderSize);

}  // namespace

EncodedFrameHeader EncodeFrameHeader(const FrameHeader& header) {
  EncodedFrameHeader bytes{};
  Store<std::uint32_t>(bytes.data() + kMagicOffset, kFrameMagic);
  Store<std::uint8_t>(bytes.data() + kVersionOffset, kFrameVersion);
  Store<std::uint8_t>(bytes.data() + kKindOffset, static_cast<std::uint8_t>(header.kind));
  Store<std::uint32_t>(bytes.data() + kSourceOffset, header.source_rank);
  Store<std::uint32_t>(bytes.data() + kMethodOffset, header.method);
  Store<std::uint64_t>(bytes.data() + kRequestIdOffset, header.request_id);
  for (std::size_t i = 0; i < kJobTokenSize; ++i) bytes[kTokenOffset + i] = header.token[i];
  return bytes;
}

Result<FrameHeader> DecodeFrameHeader(std::span<const std::byte> bytes) {
  if (bytes.size() != kFrameHeaderSize) {
    return Status::InvalidArgument("malformed frame: header is " + std::to_string(bytes.size()) +
                                   " bytes, expected " + std::to_string(kFrameHeaderSize) +
                                   ": the sender is not an sray process of this version");
  }
  if (Load<std::uint32_t>(bytes.data() + kMagicOffset) != kFrameMagic) {
    return Status::InvalidArgument("malformed frame: bad magic: the sender is not an sray process");
  }
  const auto version = Load<std::uint8_t>(bytes.data() + kVersionOffset);
  if (version != kFrameVersion) {
    return Status::InvalidArgument("malformed frame: protocol version " + std::to_string(version) +
                                   ", expected " + std::to_string(kFrameVersion) +
                                   ": run the same sray build on every node");
  }
  const auto kind = Load<std::uint8_t>(bytes.data() + kKindOffset);
  if (kind < static_cast<std::uint8_t>(FrameKind::kRequest) ||
      kind > static_cast<std::uint8_t>(FrameKind::kBatch)) {
    return Status::InvalidArgument("malformed frame: unknown kind " + std::to_string(kind));
  }
  FrameHeader header;
  header.kind = static_cast<FrameKind>(kind);
  header.source_rank = Load<std::uint32_t>(bytes.data() + kSourceOffset);
  header.method = Load<std::uint32_t>(bytes.data() + kMethodOffset);
  header.request_id = Load<std::uint64_t>(bytes.data() + kRequestIdOffset);
  for (std::size_t i = 0; i < kJobTokenSize; ++i) header.token[i] = bytes[kTokenOffset + i];
  return header;
}

bool TokensMatch(const JobToken& expected, const JobToken& received) {
  std::uint8_t difference = 0;
  for (std::size_t i = 0; i < kJobTokenSize; ++i) {
    difference |= std::to_integer<std::uint8_t>(expected[i] ^ received[i]);
  }
  return difference == 0;
}

Bytes EncodeErrorResponse(const Status& status) {
  Bytes bytes(1 + status.message().size());
  bytes[0] = static_cast<std::byte>(status.code());
  std::memcpy(bytes.data() + 1, status.message().data(), status.message().size());
  return bytes;
}

Status DecodeErrorResponse(std::span<const std::byte> payload) {
  if (payload.empty()) return Status::Internal("the peer sent an empty error response");
  return Status::FromCode(static_cast<StatusCode>(payload[0]),
                          std::string(TextOf(payload.subspan(1))));
}

}  // namespace sray::transport
