#include "transport/message_batch.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace sray::transport {
namespace {

std::vector<std::pair<std::uint32_t, std::string>> Unpack(const Bytes& payload, Status* status) {
  std::vector<std::pair<std::uint32_t, std::string>> messages;
  *status =
      ForEachBatchedMessage(payload, [&](std::uint32_t method, std::span<const std::byte> bytes) {
        messages.emplace_back(method, std::string(TextOf(bytes)));
      });
  return messages;
}

TEST(MessageBatch, MessagesComeOutInOrderWithTheirMethods) {
  MessageBatch batch;
  batch.Append(7, BytesOf("first"));
  batch.Append(9, BytesOf(""));
  batch.Append(7, BytesOf(std::string(3000, 'x')));
  EXPECT_EQ(batch.count(), 3u);
  const Bytes payload = batch.Take();
  EXPECT_EQ(batch.count(), 0u);
  EXPECT_EQ(batch.size_bytes(), 0u);
  Status status;
  const auto messages = Unpack(payload, &status);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_EQ(messages.size(), 3u);
  EXPECT_EQ(messages[0], std::make_pair(7u, std::string("first")));
  EXPECT_EQ(messages[1], std::make_pair(9u, std::string()));
  EXPECT_EQ(messages[2], std::make_pair(7u, std::string(3000, 'x')));
}

TEST(MessageBatch, AnEmptyPayloadDeliversNothing) {
  Status status;
  EXPECT_TRUE(Unpack({}, &status).empty());
  EXPECT_TRUE(status.ok());
}

TEST(MessageBatch, ATruncatedBatchDeliversNothingAndSaysWhy) {
  MessageBatch batch;
  batch.Append(1, BytesOf("kept"));
  batch.Append(2, BytesOf("cut short"));
  const Bytes whole = batch.Take();
  for (std::size_t cut = 1; cut < whole.size(); ++cut) {
    const Bytes truncated(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(cut));
    Status status;
    const auto messages = Unpack(truncated, &status);
    const std::size_t first_size = kBatchEntryHeaderSize + 4;
    if (cut == first_size) {
      // A whole first message and nothing else is a valid batch of one.
      EXPECT_TRUE(status.ok());
      continue;
    }
    EXPECT_FALSE(status.ok()) << "cut at " << cut;
    EXPECT_NE(status.message().find("malformed batch frame"), std::string::npos);
    EXPECT_TRUE(messages.empty()) << "a damaged batch delivered a prefix, cut at " << cut;
  }
}

TEST(MessageBatch, ALengthPastTheEndIsRejected) {
  MessageBatch batch;
  batch.Append(1, BytesOf("abc"));
  Bytes payload = batch.Take();
  payload[4] = std::byte{0xFF};  // length's low byte: 255 bytes claimed, 3 there
  Status status;
  EXPECT_TRUE(Unpack(payload, &status).empty());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("a message of 255 bytes with only 3 left"), std::string::npos)
      << status.message();
}

}  // namespace
}  // namespace sray::transport
