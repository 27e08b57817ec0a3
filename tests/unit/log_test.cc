#include "common/log.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace sray {
namespace {

TEST(Log, ATransferIsDescribedWithBytesSecondsAndRate) {
  EXPECT_EQ(DescribeTransfer(std::uint64_t{64} << 20, 0.5),
            "67108864 bytes in 0.500 s (128 MiB/s)");
  EXPECT_EQ(DescribeTransfer(100, 0), "100 bytes in 0.000 s (0 MiB/s)") << "no division by zero";
}

TEST(Log, APhaseIsDescribedInMillisecondsToATenth) {
  EXPECT_EQ(DescribeMilliseconds(std::chrono::microseconds(12345)), "12.3 ms");
  EXPECT_EQ(DescribeMilliseconds(std::chrono::seconds(2)), "2000.0 ms");
}

TEST(Log, AWaitIsDescribedInSecondsToATenth) {
  EXPECT_EQ(DescribeSeconds(std::chrono::milliseconds(30040)), "30.0 s");
  EXPECT_EQ(DescribeSeconds(std::chrono::milliseconds(30060)), "30.1 s")
      << "a silence just past a 30 s timeout must not read as 30 s";
}

TEST(Log, ErrorsAreAlwaysOnAndDebugOnlyWhenAsked) {
  if (std::getenv("SRAY_LOG_LEVEL") != nullptr) GTEST_SKIP() << "SRAY_LOG_LEVEL is set";
  // The default level: info.
  EXPECT_TRUE(LogEnabled(LogLevel::kError));
  EXPECT_TRUE(LogEnabled(LogLevel::kInfo));
  EXPECT_FALSE(LogEnabled(LogLevel::kDebug));
}

}  // namespace
}  // namespace sray
