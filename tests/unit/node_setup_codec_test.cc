#include "jobsetup/node_setup_codec.h"

#include <gtest/gtest.h>

#include <string>

namespace sray::jobsetup {
namespace {

NodeSetup FullSetup() {
  NodeSetup setup;
  setup.session_directory = "/tmp/sray-999-7.0";
  setup.environment =
      TaskEnvironment{.role = "worker",
                      .node_id = 2,
                      .num_nodes = 3,
                      .head_host = "n1",
                      .session_dir = "/tmp/sray-999-7.0",
                      .job_id = "7",
                      .step_id = "0",
                      .node_cpus = 4,
                      .node_memory_bytes = std::uint64_t{3} << 40,
                      .option_variables = {{"SRAY_TMPDIR", "/tmp"}, {"SRAY_LOG_LEVEL", "info"}},
                      .activation_variables = {{"PATH", "/env/bin:/usr/bin"}, {"EMPTY", ""}},
                      .unset_variables = {"OLD_VARIABLE"}};
  return setup;
}

TEST(NodeSetupCodec, ASetUpNodeComesBackFieldForField) {
  const auto decoded = DecodeNodeSetupResult(EncodeNodeSetupResult(FullSetup()));
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  const NodeSetup expected = FullSetup();
  EXPECT_EQ(decoded->session_directory, expected.session_directory);
  const TaskEnvironment& got = decoded->environment;
  EXPECT_EQ(got.role, "worker");
  EXPECT_EQ(got.node_id, 2U);
  EXPECT_EQ(got.num_nodes, 3U);
  EXPECT_EQ(got.head_host, "n1");
  EXPECT_EQ(got.session_dir, expected.environment.session_dir);
  EXPECT_EQ(got.job_id, "7");
  EXPECT_EQ(got.step_id, "0");
  EXPECT_EQ(got.node_cpus, 4U);
  EXPECT_EQ(got.node_memory_bytes, std::uint64_t{3} << 40);
  EXPECT_EQ(got.option_variables, expected.environment.option_variables);
  EXPECT_EQ(got.activation_variables, expected.environment.activation_variables);
  EXPECT_EQ(got.unset_variables, expected.environment.unset_variables);
}

TEST(NodeSetupCodec, AFailureKeepsItsCodeAndMessage) {
  const auto decoded = DecodeNodeSetupResult(
      EncodeNodeSetupResult(Status::NotFound("environment /envs/x: no such prefix")));
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(decoded.status().message(), "environment /envs/x: no such prefix");
}

TEST(NodeSetupCodec, EveryTruncationIsRefusedAsCorrupt) {
  const std::string bytes = EncodeNodeSetupResult(FullSetup());
  for (std::size_t length = 0; length < bytes.size(); ++length) {
    const auto decoded = DecodeNodeSetupResult(std::string_view(bytes).substr(0, length));
    ASSERT_FALSE(decoded.ok()) << "accepted " << length << " of " << bytes.size() << " bytes";
    EXPECT_EQ(decoded.status().code(), StatusCode::kInternal);
    EXPECT_NE(decoded.status().message().find("corrupt"), std::string::npos);
  }
}

TEST(NodeSetupCodec, ANonsenseCountIsRefusedWithoutAllocating) {
  std::string bytes = EncodeNodeSetupResult(FullSetup());
  // The option count ("2", after the CPUs and the memory) becomes a huge number.
  const std::string memory = std::to_string(std::uint64_t{3} << 40);
  const std::size_t at = bytes.find(std::string("4\0", 2) + memory + std::string("\0002\0", 3));
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at + 2 + memory.size() + 1, 1, "99999999999999");
  EXPECT_FALSE(DecodeNodeSetupResult(bytes).ok());
}

TEST(NodeSetupCodec, TrailingBytesAreRefused) {
  EXPECT_FALSE(DecodeNodeSetupResult(EncodeNodeSetupResult(FullSetup()) + "x").ok());
}

}  // namespace
}  // namespace sray::jobsetup
