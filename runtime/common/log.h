#pragma once

// sray's own diagnostic lines on standard error, kept or dropped by the
// job's log_level option (SRAY_LOG_LEVEL: error, warning, info, debug;
// default info). Each line is one write(2), so lines of processes that share
// an output (a step's ranks and workers) never interleave mid-line.
//
// Thread-safety: any thread; the level is read once, on first use.

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace sray {

enum class LogLevel : std::uint8_t { kError = 0, kWarning = 1, kInfo = 2, kDebug = 3 };

// Objects at least this large have their Put and their moves between nodes
// logged at debug level, with time and rate.
inline constexpr std::uint64_t kLargeTransferBytes = std::uint64_t{64} << 20;

[[nodiscard]] bool LogEnabled(LogLevel level);
// "sray: [debug] MESSAGE\n" when the level is enabled.
void Log(LogLevel level, std::string_view message);

// "N bytes in S s (R MiB/s)": how a transfer went, for log lines.
std::string DescribeTransfer(std::uint64_t bytes, double seconds);

// "12.3 ms": how long a phase took, for log lines.
std::string DescribeMilliseconds(std::chrono::steady_clock::duration elapsed);

// "30.4 s": a longer wait, to the tenth (a silence just past a whole-second
// timeout must not read as equal to it).
std::string DescribeSeconds(std::chrono::steady_clock::duration elapsed);

}  // namespace sray
