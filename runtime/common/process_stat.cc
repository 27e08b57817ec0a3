#include "common/process_stat.h"

#include <algorithm>
#include <charconv>
#include <string>

#include "common/whole_file.h"

namespace sray {
namespace {

// Field numbers as proc(5) counts them; field 3 (the state) is the first
// after the command's closing parenthesis.
constexpr int kFlagsField = 9;
constexpr int kStartTimeField = 22;

template <typename Number>
bool ReadNumber(std::string_view field, Number& number) {
  const char* end = field.data() + field.size();
  const auto [stop, error] = std::from_chars(field.data(), end, number);
  return error == std::errc() && stop == end && !field.empty();
}

}  // namespace

std::optional<ProcessStat> ParseProcessStat(std::string_view line) {
  const std::size_t close = line.rfind(')');
  if (close == std::string_view::npos) return std::nullopt;
  std::string_view rest = line.substr(close + 1);
  ProcessStat stat;
  int field = 3;
  while (field <= kStartTimeField) {
    const std::size_t begin = rest.find_first_not_of(" \n");
    if (begin == std::string_view::npos) return std::nullopt;
    rest.remove_prefix(begin);
    const std::size_t end = std::min(rest.find_first_of(" \n"), rest.size());
    const std::string_view value = rest.substr(0, end);
    if (field == 3) {
      if (value.size() != 1) return std::nullopt;
      stat.state = value[0];
    } else if (field == kFlagsField) {
      if (!ReadNumber(value, stat.flags)) return std::nullopt;
    } else if (field == kStartTimeField) {
      if (!ReadNumber(value, stat.start_time)) return std::nullopt;
    }
    rest.remove_prefix(end);
    ++field;
  }
  return stat;
}

std::optional<ProcessStat> ReadProcessStat(const std::string& stat_path) {
  const std::optional<std::string> line = ReadWholeFile(stat_path);
  if (!line) return std::nullopt;
  return ParseProcessStat(*line);
}

std::optional<ProcessStat> ReadProcessStat(pid_t pid) {
  return ReadProcessStat("/proc/" + std::to_string(pid) + "/stat");
}

bool IsPausedState(char state) {
  return state == 'T' || state == 't' || state == 'D';
}

std::uint64_t ProcessStartTime(pid_t pid) {
  const std::optional<ProcessStat> stat = ReadProcessStat(pid);
  if (!stat || stat->state == 'Z' || stat->state == 'X') return 0;
  return stat->start_time;
}

}  // namespace sray
