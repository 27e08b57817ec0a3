#include "common/hex.h"

namespace sray {
namespace {

constexpr char kDigits[] = "0123456789abcdef";

}  // namespace

int HexDigitValue(char digit) {
  if (digit >= '0' && digit <= '9') return digit - '0';
  if (digit >= 'a' && digit <= 'f') return digit - 'a' + 10;
  if (digit >= 'A' && digit <= 'F') return digit - 'A' + 10;
  return -1;
}

std::string HexOf(std::span<const unsigned char> bytes) {
  std::string text;
  text.reserve(bytes.size() * 2);
  for (const unsigned char byte : bytes) {
    text += kDigits[byte >> 4U];
    text += kDigits[byte & 15U];
  }
  return text;
}

std::string HexOf(std::span<const std::byte> bytes) {
  return HexOf(std::span<const unsigned char>(reinterpret_cast<const unsigned char*>(bytes.data()),
                                              bytes.size()));
}

std::optional<std::vector<std::byte>> BytesFromHex(std::string_view text) {
  if (text.size() % 2 != 0) return std::nullopt;
  std::vector<std::byte> bytes(text.size() / 2);
  for (std::size_t index = 0; index < bytes.size(); ++index) {
    const int high = HexDigitValue(text[index * 2]);
    const int low = HexDigitValue(text[index * 2 + 1]);
    if (high < 0 || low < 0) return std::nullopt;
    bytes[index] = static_cast<std::byte>(high * 16 + low);
  }
  return bytes;
}

}  // namespace sray
