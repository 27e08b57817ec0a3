#pragma once

// The byte format of what job setup hands from one process to another: a
// node's setup from the child that prepared it as the job user, and a step's
// record on a node (step_record.h). Fields are NUL-terminated strings; no
// field may contain NUL (paths, ids and environment variables cannot).
//
// Thread-safety: a writer or reader belongs to one thread.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/whole_number.h"

namespace sray::jobsetup {

class FieldWriter {
 public:
  void Field(std::string_view value) {
    bytes_.append(value);
    bytes_.push_back('\0');
  }
  void Number(std::uint64_t value) { Field(std::to_string(value)); }
  void Pairs(const std::vector<std::pair<std::string, std::string>>& pairs) {
    Number(pairs.size());
    for (const auto& [name, value] : pairs) {
      Field(name);
      Field(value);
    }
  }
  std::string Take() && { return std::move(bytes_); }

 private:
  std::string bytes_;
};

// Each read returns nothing once the bytes run out or do not hold what was
// asked for; the caller names what was corrupt.
class FieldReader {
 public:
  explicit FieldReader(std::string_view bytes) : rest_(bytes) {}

  std::optional<std::string> Field() {
    const std::size_t end = rest_.find('\0');
    if (end == std::string_view::npos) return std::nullopt;
    std::string value(rest_.substr(0, end));
    rest_.remove_prefix(end + 1);
    return value;
  }
  std::optional<std::uint64_t> Number() {
    auto text = Field();
    if (!text) return std::nullopt;
    return WholeNumber<std::uint64_t>(*text);
  }
  std::optional<std::uint32_t> Number32() {
    auto value = Number();
    if (!value || *value > UINT32_MAX) return std::nullopt;
    return static_cast<std::uint32_t>(*value);
  }
  std::optional<std::vector<std::pair<std::string, std::string>>> Pairs() {
    auto count = Number();
    // Each pair takes at least two bytes: a larger count is corrupt.
    if (!count || *count > rest_.size() / 2) return std::nullopt;
    std::vector<std::pair<std::string, std::string>> pairs;
    pairs.reserve(*count);
    for (std::uint64_t i = 0; i < *count; ++i) {
      auto name = Field();
      auto value = Field();
      if (!name || !value) return std::nullopt;
      pairs.emplace_back(std::move(*name), std::move(*value));
    }
    return pairs;
  }
  // Bytes left: a count read from the input larger than this is corrupt.
  [[nodiscard]] std::size_t Remaining() const { return rest_.size(); }
  [[nodiscard]] bool AtEnd() const { return rest_.empty(); }

 private:
  std::string_view rest_;
};

}  // namespace sray::jobsetup
