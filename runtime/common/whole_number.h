#pragma once

// Reads text that must be one whole number and nothing else (environment
// variables written by sray, for example): no sign where the type has
// none, no spaces, no trailing characters. `base` 16 reads hexadecimal
// without a prefix (/proc's addresses).

#include <charconv>
#include <optional>
#include <string_view>

namespace sray {

template <typename Number>
std::optional<Number> WholeNumber(std::string_view text, int base = 10) {
  Number number{};
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, number, base);
  if (text.empty() || error != std::errc() || stop != end) return std::nullopt;
  return number;
}

}  // namespace sray
