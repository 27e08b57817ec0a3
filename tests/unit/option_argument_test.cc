#include "option_argument.h"

#include <gtest/gtest.h>

namespace sray::spank {
namespace {

TEST(OptionArgument, MissingValuesMeanNoOptions) {
  EXPECT_EQ(OptionListFromArgument(nullptr), "");
  EXPECT_EQ(OptionListFromArgument(""), "");
}

TEST(OptionArgument, SbatchNullRenderingMeansNoOptions) {
  EXPECT_EQ(OptionListFromArgument("(null)"), "");
}

TEST(OptionArgument, ValuesPassThroughUnchanged) {
  EXPECT_EQ(OptionListFromArgument("log_level=debug,tmpdir=/x"), "log_level=debug,tmpdir=/x");
  EXPECT_EQ(OptionListFromArgument("config=/home/u/(null).toml"), "config=/home/u/(null).toml");
}

}  // namespace
}  // namespace sray::spank
