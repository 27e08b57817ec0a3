#include "common/whole_number.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace sray {
namespace {

TEST(WholeNumber, AcceptsOnlyTextThatIsOneNumberAndNothingElse) {
  EXPECT_EQ(WholeNumber<std::uint32_t>("42"), 42U);
  EXPECT_EQ(WholeNumber<int>("-7"), -7);
  EXPECT_FALSE(WholeNumber<std::uint32_t>(""));
  EXPECT_FALSE(WholeNumber<std::uint32_t>("12x"));
  EXPECT_FALSE(WholeNumber<std::uint32_t>(" 12"));
  EXPECT_FALSE(WholeNumber<std::uint32_t>("-1"));
  EXPECT_FALSE(WholeNumber<std::uint8_t>("300"));  // out of range
}

}  // namespace
}  // namespace sray
