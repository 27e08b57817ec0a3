#include "common/copy_in_pieces.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace sray {
namespace {

std::vector<std::uint8_t> Pattern(std::size_t length) {
  std::vector<std::uint8_t> bytes(length);
  for (std::size_t index = 0; index < length; ++index) {
    bytes[index] = static_cast<std::uint8_t>((index * 131 + index / 4096) & 0xff);
  }
  return bytes;
}

TEST(CopyInPieces, CopiesEveryByteOfLengthsAroundThePieceSizeAndNothingPastTheEnd) {
  constexpr std::size_t kPiece = kCopyPieceBytes;
  for (const std::size_t length :
       {std::size_t{0}, std::size_t{1}, kPiece - 1, kPiece, kPiece + 1, 3 * kPiece + 17}) {
    const std::vector<std::uint8_t> source = Pattern(length);
    std::vector<std::uint8_t> target(length + 64, 0xee);
    CopyInPieces(target.data(), source.data(), length);
    EXPECT_TRUE(std::equal(source.begin(), source.end(), target.begin())) << "length " << length;
    for (std::size_t index = length; index < target.size(); ++index) {
      ASSERT_EQ(target[index], 0xee) << "byte " << index << " past a copy of " << length;
    }
  }
}

TEST(CopyInPieces, CopiesFromAndToUnalignedAddresses) {
  const std::vector<std::uint8_t> source = Pattern(2 * kCopyPieceBytes + 64);
  std::vector<std::uint8_t> target(source.size(), 0);
  const std::size_t length = 2 * kCopyPieceBytes + 5;
  CopyInPieces(target.data() + 3, source.data() + 7, length);
  EXPECT_TRUE(std::equal(source.begin() + 7,
                         source.begin() + 7 + static_cast<std::ptrdiff_t>(length),
                         target.begin() + 3));
  EXPECT_EQ(target[0], 0);
  EXPECT_EQ(target[3 + length], 0);
}

}  // namespace
}  // namespace sray
