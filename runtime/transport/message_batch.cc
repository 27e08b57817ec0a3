#include "transport/message_batch.h"

#include <cstring>
#include <string>

namespace sray::transport {
namespace {

void StoreU32(std::byte* out, std::uint32_t value) {
  for (std::size_t i = 0; i < 4; ++i) out[i] = static_cast<std::byte>((value >> (8 * i)) & 0xFFU);
}

std::uint32_t LoadU32(const std::byte* in) {
  std::uint32_t value = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    value |= static_cast<std::uint32_t>(std::to_integer<std::uint8_t>(in[i])) << (8 * i);
  }
  return value;
}

}  // namespace

void MessageBatch::Append(std::uint32_t method, std::span<const std::byte> payload) {
  const std::size_t start = bytes_.size();
  bytes_.resize(start + kBatchEntryHeaderSize + payload.size());
  StoreU32(bytes_.data() + start, method);
  StoreU32(bytes_.data() + start + 4, static_cast<std::uint32_t>(payload.size()));
  if (!payload.empty()) {
    std::memcpy(bytes_.data() + start + kBatchEntryHeaderSize, payload.data(), payload.size());
  }
  ++count_;
}

Bytes MessageBatch::Take() {
  Bytes taken;
  taken.swap(bytes_);
  count_ = 0;
  return taken;
}

Status ForEachBatchedMessage(
    std::span<const std::byte> payload,
    const std::function<void(std::uint32_t method, std::span<const std::byte> message)>& deliver) {
  // Validated whole first: a damaged batch delivers nothing rather than a
  // prefix of it.
  std::size_t offset = 0;
  while (offset < payload.size()) {
    if (payload.size() - offset < kBatchEntryHeaderSize) {
      return Status::InvalidArgument(
          "malformed batch frame: " + std::to_string(payload.size() - offset) +
          " bytes left where a message header of 8 was expected");
    }
    const std::size_t length = LoadU32(payload.data() + offset + 4);
    if (payload.size() - offset - kBatchEntryHeaderSize < length) {
      return Status::InvalidArgument(
          "malformed batch frame: a message of " + std::to_string(length) + " bytes with only " +
          std::to_string(payload.size() - offset - kBatchEntryHeaderSize) + " left");
    }
    offset += kBatchEntryHeaderSize + length;
  }
  offset = 0;
  while (offset < payload.size()) {
    const std::uint32_t method = LoadU32(payload.data() + offset);
    const std::size_t length = LoadU32(payload.data() + offset + 4);
    deliver(method, payload.subspan(offset + kBatchEntryHeaderSize, length));
    offset += kBatchEntryHeaderSize + length;
  }
  return Status::Ok();
}

}  // namespace sray::transport
