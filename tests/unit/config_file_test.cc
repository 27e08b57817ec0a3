#include "jobsetup/config_file.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jobsetup/resolved_options.h"
#include "test_files.h"

namespace sray::jobsetup {
namespace {

using sray::testing::ScratchDirectory;

TEST(ConfigFile, ReadsKnownKeysWithTheirLines) {
  ScratchDirectory scratch;
  const auto file = scratch.Write(
      "sray.toml", "# admin defaults\ntmpdir = \"/scratch\"\n\nlog_level = 'warning'\n");
  auto read = ReadConfigFile(file);
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_EQ(read->size(), 2U);
  for (const auto& assignment : *read) {
    if (assignment.key == "tmpdir") {
      EXPECT_EQ(assignment.value, "/scratch");
      EXPECT_EQ(assignment.source, file.string() + ":2");
    } else {
      EXPECT_EQ(assignment.key, "log_level");
      EXPECT_EQ(assignment.value, "warning");
      EXPECT_EQ(assignment.source, file.string() + ":4");
    }
  }
}

TEST(ConfigFile, EmptyFileIsValid) {
  ScratchDirectory scratch;
  auto read = ReadConfigFile(scratch.Write("empty.toml", ""));
  ASSERT_TRUE(read.ok());
  EXPECT_TRUE(read->empty());
}

TEST(ConfigFile, MissingFileSaysSoAndWhatToCheck) {
  auto read = ReadConfigFile("/nonexistent/sray.toml");
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), StatusCode::kNotFound);
  EXPECT_NE(read.status().message().find("/nonexistent/sray.toml"), std::string::npos);
}

TEST(ConfigFile, UnreadableFileIsAPermissionError) {
  ScratchDirectory scratch;
  const auto file = scratch.Write("secret.toml", "log_level = \"info\"\n");
  std::filesystem::permissions(file, std::filesystem::perms::none);
  if (geteuid() != 0) {
    auto read = ReadConfigFile(file);
    ASSERT_FALSE(read.ok());
    EXPECT_EQ(read.status().code(), StatusCode::kPermissionDenied);
    return;
  }
  // Root reads every file: check from a child that has become "nobody".
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    auto read = ReadConfigFile(file);
    _exit(!read.ok() && read.status().code() == StatusCode::kPermissionDenied ? 0 : 1);
  }
  int wait_status = 0;
  ASSERT_EQ(waitpid(child, &wait_status, 0), child);
  ASSERT_TRUE(WIFEXITED(wait_status));
  EXPECT_EQ(WEXITSTATUS(wait_status), 0) << "2: could not drop privileges, 1: wrong error";
}

TEST(ConfigFile, DirectoryInsteadOfFileFails) {
  ScratchDirectory scratch;
  EXPECT_FALSE(ReadConfigFile(scratch.path()).ok());
}

TEST(ConfigFile, MalformedTomlNamesFileAndLine) {
  ScratchDirectory scratch;
  const auto file = scratch.Write("bad.toml", "log_level = \"info\"\ntmpdir = \n");
  auto read = ReadConfigFile(file);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find(file.string() + ":2"), std::string::npos)
      << read.status().message();
  EXPECT_NE(read.status().message().find("malformed TOML"), std::string::npos);
}

TEST(ConfigFile, UnknownKeyNamesFileLineAndAcceptedKeys) {
  ScratchDirectory scratch;
  const auto file = scratch.Write("typo.toml", "log_level = \"info\"\ntmp_dir = \"/x\"\n");
  auto read = ReadConfigFile(file);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find(file.string() + ":2: unknown key 'tmp_dir'"),
            std::string::npos)
      << read.status().message();
  EXPECT_NE(read.status().message().find(AcceptedKeys()), std::string::npos);
}

TEST(ConfigFile, NonStringValuesAndTablesAreRejected) {
  ScratchDirectory scratch;
  EXPECT_FALSE(ReadConfigFile(scratch.Write("int.toml", "log_level = 3\n")).ok());
  EXPECT_FALSE(ReadConfigFile(scratch.Write("array.toml", "tmpdir = [\"/a\"]\n")).ok());
  auto table = ReadConfigFile(scratch.Write("table.toml", "[defaults]\nlog_level = \"info\"\n"));
  ASSERT_FALSE(table.ok());
  EXPECT_NE(table.status().message().find("unknown key 'defaults'"), std::string::npos);
}

TEST(ConfigFile, BadValueNamesFileAndLine) {
  ScratchDirectory scratch;
  const auto file = scratch.Write("value.toml", "\nlog_level = \"chatty\"\n");
  auto read = ReadConfigFile(file);
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find(file.string() + ":2"), std::string::npos);
  EXPECT_NE(read.status().message().find("does not accept 'chatty'"), std::string::npos);
}

TEST(ConfigFile, ConfigKeyIsOnlyForTheCommandLine) {
  ScratchDirectory scratch;
  auto read = ReadConfigFile(scratch.Write("loop.toml", "config = \"/etc/other.toml\"\n"));
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("only accepted in --ray-cluster"), std::string::npos);
}

TEST(ResolveOptions, DefaultsApplyWithoutAnyInput) {
  auto resolved = ResolveOptions({});
  ASSERT_TRUE(resolved.ok());
  EXPECT_EQ(resolved->Get("tmpdir"), "/tmp");
  EXPECT_EQ(resolved->Get("log_level"), "info");
  EXPECT_EQ(resolved->SourceOf("tmpdir"), "default");
  EXPECT_EQ(resolved->Get("config"), "");
}

TEST(ResolveOptions, CommandLineBeatsUserFileBeatsAdminFile) {
  ScratchDirectory scratch;
  const auto admin = scratch.Write("admin.toml", "tmpdir = \"/admin\"\nlog_level = \"error\"\n");
  const auto user = scratch.Write("user.toml", "log_level = \"warning\"\ntmpdir = \"/user\"\n");
  auto resolved = ResolveOptions(
      {.admin_config = admin, .option_list = "config=" + user.string() + ",tmpdir=/cli"});
  ASSERT_TRUE(resolved.ok()) << resolved.status().message();
  EXPECT_EQ(resolved->Get("tmpdir"), "/cli");
  EXPECT_EQ(resolved->SourceOf("tmpdir"), "--ray-cluster");
  EXPECT_EQ(resolved->Get("log_level"), "warning");
  EXPECT_EQ(resolved->SourceOf("log_level"), user.string() + ":1");

  auto admin_only = ResolveOptions({.admin_config = admin, .option_list = ""});
  ASSERT_TRUE(admin_only.ok());
  EXPECT_EQ(admin_only->Get("log_level"), "error");
}

TEST(ResolveOptions, ErrorsSayWhichFileWasAtFault) {
  ScratchDirectory scratch;
  const auto bad = scratch.Write("bad.toml", "colour = \"red\"\n");
  auto as_admin = ResolveOptions({.admin_config = bad, .option_list = ""});
  ASSERT_FALSE(as_admin.ok());
  EXPECT_TRUE(as_admin.status().message().starts_with("admin configuration: "));
  auto as_user =
      ResolveOptions({.admin_config = std::nullopt, .option_list = "config=" + bad.string()});
  ASSERT_FALSE(as_user.ok());
  EXPECT_TRUE(as_user.status().message().starts_with("user configuration (config=): "));
}

TEST(ResolveOptions, ExportsAndRoundTripsThroughTheOptionList) {
  auto resolved = ResolveOptions({.admin_config = std::nullopt, .option_list = "log_level=debug"});
  ASSERT_TRUE(resolved.ok());
  const auto variables = resolved->EnvironmentVariables();
  EXPECT_NE(std::find(variables.begin(), variables.end(),
                      std::pair<std::string, std::string>{"SRAY_LOG_LEVEL", "debug"}),
            variables.end());
  auto again =
      ResolveOptions({.admin_config = std::nullopt, .option_list = resolved->ToOptionList()});
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->ToOptionList(), resolved->ToOptionList());
}

}  // namespace
}  // namespace sray::jobsetup
