#include "plugstack_arguments.h"

#include <gtest/gtest.h>

#include <vector>

namespace sray::spank {
namespace {

Result<PlugstackArguments> Parse(std::vector<std::string_view> arguments) {
  return ParsePlugstackArguments(arguments);
}

TEST(PlugstackArguments, NoArgumentsMeansNoAdminConfig) {
  auto parsed = Parse({});
  ASSERT_TRUE(parsed.ok());
  EXPECT_FALSE(parsed->admin_config.has_value());
}

TEST(PlugstackArguments, AcceptsAnAbsoluteConfigPath) {
  auto parsed = Parse({"config=/etc/sray/sray.toml"});
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed->admin_config, "/etc/sray/sray.toml");
}

TEST(PlugstackArguments, RejectsUnknownRepeatedAndRelativeArguments) {
  auto unknown = Parse({"conifg=/etc/sray.toml"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown argument 'conifg=/etc/sray.toml'"),
            std::string::npos);
  EXPECT_FALSE(Parse({"config=/a.toml", "config=/b.toml"}).ok());
  EXPECT_FALSE(Parse({"config=sray.toml"}).ok());
  EXPECT_FALSE(Parse({"config="}).ok());
}

}  // namespace
}  // namespace sray::spank
