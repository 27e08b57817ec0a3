#include "transport/frame.h"

#include <gtest/gtest.h>

#include <vector>

namespace sray::transport {
namespace {

FrameHeader SampleHeader() {
  FrameHeader header;
  header.kind = FrameKind::kErrorResponse;
  header.source_rank = 0xA1B2C3D4;
  header.method = 77;
  header.request_id = 0x0102030405060708ULL;
  for (std::size_t i = 0; i < header.token.size(); ++i) header.token[i] = std::byte(i * 7);
  return header;
}

TEST(Frame, EveryKindRoundTrips) {
  for (auto kind :
       {FrameKind::kRequest, FrameKind::kResponse, FrameKind::kErrorResponse, FrameKind::kOneWay,
        FrameKind::kBatch}) {
    FrameHeader header = SampleHeader();
    header.kind = kind;
    const auto bytes = EncodeFrameHeader(header);
    auto decoded = DecodeFrameHeader(bytes);
    ASSERT_TRUE(decoded.ok()) << decoded.status().message();
    EXPECT_EQ(decoded->kind, kind);
    EXPECT_EQ(decoded->source_rank, header.source_rank);
    EXPECT_EQ(decoded->method, header.method);
    EXPECT_EQ(decoded->request_id, header.request_id);
    EXPECT_TRUE(TokensMatch(decoded->token, header.token));
  }
}

TEST(Frame, EncodingIsLittleEndianAndStable) {
  const auto bytes = EncodeFrameHeader(SampleHeader());
  EXPECT_EQ(bytes[0], std::byte{'S'});
  EXPECT_EQ(bytes[1], std::byte{'R'});
  EXPECT_EQ(bytes[2], std::byte{'A'});
  EXPECT_EQ(bytes[3], std::byte{'Y'});
  EXPECT_EQ(bytes[8], std::byte{0xD4});   // source rank, lowest byte first
  EXPECT_EQ(bytes[16], std::byte{0x08});  // request id, lowest byte first
}

TEST(Frame, TruncatedAndOversizedHeadersAreRejected) {
  const auto bytes = EncodeFrameHeader(SampleHeader());
  for (std::size_t length = 0; length < bytes.size(); ++length) {
    auto decoded = DecodeFrameHeader(std::span(bytes.data(), length));
    ASSERT_FALSE(decoded.ok()) << length;
    EXPECT_NE(decoded.status().message().find("malformed frame: header is"), std::string::npos);
  }
  std::vector<std::byte> longer(bytes.begin(), bytes.end());
  longer.push_back(std::byte{0});
  EXPECT_FALSE(DecodeFrameHeader(longer).ok());
}

TEST(Frame, CorruptedFieldsAreRejectedWithTheReason) {
  auto bad_magic = EncodeFrameHeader(SampleHeader());
  bad_magic[0] = std::byte{'X'};
  EXPECT_NE(DecodeFrameHeader(bad_magic).status().message().find("bad magic"), std::string::npos);

  auto bad_version = EncodeFrameHeader(SampleHeader());
  bad_version[4] = std::byte{9};
  EXPECT_NE(DecodeFrameHeader(bad_version).status().message().find("protocol version 9"),
            std::string::npos);

  for (int kind : {0, 6, 255}) {
    auto bad_kind = EncodeFrameHeader(SampleHeader());
    bad_kind[5] = static_cast<std::byte>(kind);
    EXPECT_NE(DecodeFrameHeader(bad_kind).status().message().find("unknown kind"),
              std::string::npos);
  }
}

TEST(Frame, EveryByteFlipEitherDecodesOrFailsCleanly) {
  const auto original = EncodeFrameHeader(SampleHeader());
  for (std::size_t i = 0; i < original.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      auto flipped = original;
      flipped[i] ^= std::byte(1U << bit);
      auto decoded = DecodeFrameHeader(flipped);
      if (decoded.ok()) {
        EXPECT_GE(i, 5U) << "a flip in magic or version must not decode";
      }
    }
  }
}

TEST(Frame, TokensCompareExactly) {
  JobToken a{};
  JobToken b{};
  EXPECT_TRUE(TokensMatch(a, b));
  b[15] = std::byte{1};
  EXPECT_FALSE(TokensMatch(a, b));
}

}  // namespace
}  // namespace sray::transport
