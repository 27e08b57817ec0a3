#pragma once

// Bytes as lower-case hexadecimal text, and back: for secrets and addresses
// passed in environment variables, and for digests.
//
// Thread-safety: pure functions.

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sray {

std::string HexOf(std::span<const std::byte> bytes);
std::string HexOf(std::span<const unsigned char> bytes);
// The value of one hex digit (either case), or -1 for another character.
int HexDigitValue(char digit);
// Nullopt when `text` has an odd length or a character that is not a hex digit.
std::optional<std::vector<std::byte>> BytesFromHex(std::string_view text);

}  // namespace sray
