#include "common/mebibytes.h"

#include <cstdint>

#include <gtest/gtest.h>

namespace sray {
namespace {

TEST(Mebibytes, WholeMebibytesRoundDown) {
  EXPECT_EQ(WholeMebibytes(0), "0 MiB");
  EXPECT_EQ(WholeMebibytes((std::uint64_t{144} << 20) - 1), "143 MiB");
  EXPECT_EQ(WholeMebibytes(std::uint64_t{144} << 20), "144 MiB");
}

TEST(Mebibytes, MebibytesHaveOneDecimal) {
  EXPECT_EQ(Mebibytes(std::uint64_t{1} << 19), "0.5 MiB");
  EXPECT_EQ(Mebibytes(75497477), "72.0 MiB");
  EXPECT_EQ(Mebibytes((std::uint64_t{1} << 30) + (std::uint64_t{1} << 20) / 10 * 3), "1024.3 MiB");
}

}  // namespace
}  // namespace sray
