#include "common/host_load.h"

#include <unistd.h>

#include <fstream>
#include <string>

namespace sray {

HostLoad ReadHostLoad() {
  HostLoad load;
  if (std::ifstream loadavg("/proc/loadavg"); loadavg) {
    double one_minute = 0;
    if (loadavg >> one_minute) load.load_average_1m = one_minute;
  }
  std::ifstream meminfo("/proc/meminfo");
  std::string name;
  std::uint64_t kibibytes = 0;
  std::string unit;
  while (meminfo >> name >> kibibytes >> unit) {
    if (name == "MemTotal:") load.memory_total_bytes = kibibytes * 1024;
    if (name == "MemAvailable:") load.memory_available_bytes = kibibytes * 1024;
  }
  return load;
}

std::uint64_t ResidentBytes(pid_t pid) {
  std::ifstream statm("/proc/" + std::to_string(pid) + "/statm");
  std::uint64_t size_pages = 0;
  std::uint64_t resident_pages = 0;
  if (!(statm >> size_pages >> resident_pages)) return 0;
  return resident_pages * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace sray
