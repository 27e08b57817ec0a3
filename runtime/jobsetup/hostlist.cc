#include "jobsetup/hostlist.h"

#include <charconv>

namespace sray::jobsetup {
namespace {

Status Malformed(std::string_view hostlist, std::string_view why) {
  return Status::InvalidArgument("malformed hostlist '" + std::string(hostlist) +
                                 "': " + std::string(why) +
                                 ": expected names like n1,n[2-4],gpu[01-02]-ib");
}

// Splits on commas that are not inside brackets.
Result<std::vector<std::string_view>> SplitTopLevel(std::string_view hostlist) {
  std::vector<std::string_view> items;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= hostlist.size(); ++i) {
    const char c = i < hostlist.size() ? hostlist[i] : ',';
    if (c == '[') {
      if (++depth > 1) return Malformed(hostlist, "nested '['");
    } else if (c == ']') {
      if (--depth < 0) return Malformed(hostlist, "']' without '['");
    } else if (c == ',' && depth == 0) {
      if (i == start) return Malformed(hostlist, "empty name");
      items.push_back(hostlist.substr(start, i - start));
      start = i + 1;
    }
  }
  if (depth != 0) return Malformed(hostlist, "'[' without ']'");
  return items;
}

Result<unsigned long> ParseNumber(std::string_view hostlist, std::string_view digits) {
  unsigned long number = 0;
  const auto* end = digits.data() + digits.size();
  const auto [stop, error] = std::from_chars(digits.data(), end, number);
  if (digits.empty() || error != std::errc() || stop != end) {
    return Malformed(hostlist, "'" + std::string(digits) + "' is not a number");
  }
  return number;
}

std::string Padded(unsigned long number, std::size_t width) {
  std::string text = std::to_string(number);
  if (text.size() < width) text.insert(0, width - text.size(), '0');
  return text;
}

// Expands the bracket-free `prefix` + "[ranges]" + rest, appending to `names`.
Status ExpandItem(std::string_view hostlist, const std::string& prefix, std::string_view rest,
                  std::vector<std::string>& names) {
  const auto open = rest.find('[');
  if (open == std::string_view::npos) {
    if (names.size() >= kMaxHostlistNames) {
      return Malformed(hostlist, "more than " + std::to_string(kMaxHostlistNames) + " names");
    }
    names.push_back(prefix + std::string(rest));
    return Status::Ok();
  }
  const auto close = rest.find(']', open);
  const std::string head = prefix + std::string(rest.substr(0, open));
  const std::string_view ranges = rest.substr(open + 1, close - open - 1);
  const std::string_view tail = rest.substr(close + 1);
  if (ranges.empty()) return Malformed(hostlist, "empty '[]'");

  std::size_t position = 0;
  while (position <= ranges.size()) {
    const auto comma = ranges.find(',', position);
    const auto end = comma == std::string_view::npos ? ranges.size() : comma;
    const std::string_view range = ranges.substr(position, end - position);
    const auto dash = range.find('-');
    const std::string_view low_text = range.substr(0, dash);
    const std::string_view high_text =
        dash == std::string_view::npos ? low_text : range.substr(dash + 1);
    auto low = ParseNumber(hostlist, low_text);
    if (!low.ok()) return low.status();
    auto high = ParseNumber(hostlist, high_text);
    if (!high.ok()) return high.status();
    if (*high < *low)
      return Malformed(hostlist, "range '" + std::string(range) + "' runs backwards");
    if (*high - *low >= kMaxHostlistNames) {
      return Malformed(hostlist, "range '" + std::string(range) + "' is too large");
    }
    for (unsigned long number = *low; number <= *high; ++number) {
      SRAY_RETURN_IF_ERROR(
          ExpandItem(hostlist, head + Padded(number, low_text.size()), tail, names));
    }
    if (comma == std::string_view::npos) break;
    position = comma + 1;
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::string>> ExpandHostlist(std::string_view hostlist) {
  if (hostlist.empty()) return Malformed(hostlist, "it is empty");
  auto items = SplitTopLevel(hostlist);
  if (!items.ok()) return items.status();
  std::vector<std::string> names;
  for (const auto item : *items) {
    SRAY_RETURN_IF_ERROR(ExpandItem(hostlist, "", item, names));
  }
  return names;
}

}  // namespace sray::jobsetup
