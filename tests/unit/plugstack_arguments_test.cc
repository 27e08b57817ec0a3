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

TEST(PlugstackArguments, StateDirectoryHasADefaultAndTakesAnAbsolutePath) {
  auto defaulted = Parse({"config=/etc/sray/sray.toml"});
  ASSERT_TRUE(defaulted.ok());
  EXPECT_EQ(defaulted->state_directory, kDefaultStateDirectory);
  auto given = Parse({"state_dir=/var/lib/sray", "config=/etc/sray/sray.toml"});
  ASSERT_TRUE(given.ok()) << given.status().message();
  EXPECT_EQ(given->state_directory, "/var/lib/sray");
  EXPECT_EQ(*given->admin_config, "/etc/sray/sray.toml");
  const auto relative = Parse({"state_dir=spool"});
  ASSERT_FALSE(relative.ok());
  EXPECT_NE(relative.status().message().find("state_dir='spool' is not an absolute path"),
            std::string::npos);
  EXPECT_FALSE(Parse({"state_dir=/a", "state_dir=/b"}).ok());
  auto trailing = Parse({"state_dir=/var/spool//sray/"});
  ASSERT_TRUE(trailing.ok());
  EXPECT_EQ(trailing->state_directory, "/var/spool/sray");
}

}  // namespace
}  // namespace sray::spank
