#include "common/log.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace sray {
namespace {

LogLevel ReadLevel() {
  const char* configured = std::getenv("SRAY_LOG_LEVEL");
  const std::string_view level = configured == nullptr ? "info" : configured;
  if (level == "error") return LogLevel::kError;
  if (level == "warning") return LogLevel::kWarning;
  if (level == "debug") return LogLevel::kDebug;
  return LogLevel::kInfo;  // the option was checked at launch
}

constexpr std::string_view kLevelNames[] = {"error", "warning", "info", "debug"};

}  // namespace

bool LogEnabled(LogLevel level) {
  static const LogLevel configured = ReadLevel();
  return level <= configured;
}

void Log(LogLevel level, std::string_view message) {
  if (!LogEnabled(level)) return;
  std::string line = "sray: [";
  line += kLevelNames[static_cast<std::size_t>(level)];
  line += "] ";
  line += message;
  line += '\n';
  std::string_view rest = line;
  while (!rest.empty()) {
    const ssize_t written = ::write(STDERR_FILENO, rest.data(), rest.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;  // nowhere to tell it
    rest.remove_prefix(static_cast<std::size_t>(written));
  }
}

std::string DescribeTransfer(std::uint64_t bytes, double seconds) {
  char text[96];
  const double mebibytes = static_cast<double>(bytes) / (1 << 20);
  std::snprintf(text, sizeof(text), "%llu bytes in %.3f s (%.0f MiB/s)",
                static_cast<unsigned long long>(bytes), seconds,
                seconds > 0 ? mebibytes / seconds : 0.0);
  return text;
}

std::string DescribeMilliseconds(std::chrono::steady_clock::duration elapsed) {
  char text[48];
  std::snprintf(text, sizeof(text), "%.1f ms",
                std::chrono::duration<double, std::milli>(elapsed).count());
  return text;
}

std::string DescribeSeconds(std::chrono::steady_clock::duration elapsed) {
  char text[48];
  std::snprintf(text, sizeof(text), "%.1f s", std::chrono::duration<double>(elapsed).count());
  return text;
}

}  // namespace sray
