#include "common/process_start_time.h"

#include <fstream>
#include <sstream>
#include <string>

namespace sray {

std::uint64_t ProcessStartTime(pid_t pid) {
  std::ifstream stat_file("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat_file, line)) return 0;
  // The name in parentheses may hold spaces: the fields follow the last ')'.
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 > line.size()) return 0;
  std::istringstream fields(line.substr(close + 2));
  std::string state;
  fields >> state;
  if (state == "Z" || state == "X") return 0;
  std::string skipped;
  for (int field = 4; field < 22; ++field) fields >> skipped;
  std::uint64_t start_time = 0;
  fields >> start_time;
  return start_time;
}

}  // namespace sray
