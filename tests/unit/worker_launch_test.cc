#include "core/worker_launch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace sray::core {
namespace {

WorkerLaunch SampleLaunch() {
  WorkerLaunch launch;
  launch.rank = 0x40000003;
  launch.manager_rank = 2;
  launch.manager_address = transport::BytesOf(std::string("\x01\xff\x00z", 4));
  launch.head_rank = 0;
  launch.head_address = transport::BytesOf("head");
  for (std::size_t index = 0; index < launch.secret.size(); ++index) {
    launch.secret[index] = static_cast<std::byte>(index * 17);
  }
  launch.parent = 4242;
  return launch;
}

// The variables of an environment list, as getenv would see them.
std::map<std::string, std::string> AsMap(const std::vector<std::string>& environment) {
  std::map<std::string, std::string> variables;
  for (const auto& entry : environment) {
    const auto equals = entry.find('=');
    variables[entry.substr(0, equals)] = entry.substr(equals + 1);
  }
  return variables;
}

Result<WorkerLaunch> ReadFrom(const std::map<std::string, std::string>& variables) {
  return ReadWorkerLaunch([&](const char* name) -> const char* {
    auto found = variables.find(name);
    return found == variables.end() ? nullptr : found->second.c_str();
  });
}

TEST(WorkerLaunch, WhatTheNodeManagerWritesTheWorkerReadsBack) {
  const WorkerLaunch launch = SampleLaunch();
  const auto environment = WorkerEnvironment(launch, {"PATH=/bin", "SRAY_WORKER_RANK=99"});
  const auto variables = AsMap(environment);
  EXPECT_EQ(variables.at("PATH"), "/bin");
  EXPECT_EQ(std::count_if(
                environment.begin(), environment.end(),
                [](const std::string& entry) { return entry.starts_with("SRAY_WORKER_RANK="); }),
            1)
      << "the inherited SRAY_WORKER_RANK was kept";
  EXPECT_TRUE(IsWorkerLaunch([&](const char* name) -> const char* {
    auto found = variables.find(name);
    return found == variables.end() ? nullptr : found->second.c_str();
  }));
  auto read = ReadFrom(variables);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->rank, launch.rank);
  EXPECT_EQ(read->manager_rank, launch.manager_rank);
  EXPECT_EQ(read->manager_address, launch.manager_address);
  EXPECT_EQ(read->head_rank, launch.head_rank);
  EXPECT_EQ(read->head_address, launch.head_address);
  EXPECT_EQ(read->secret, launch.secret);
  EXPECT_EQ(read->parent, launch.parent);
}

TEST(WorkerLaunch, GarbageIsAStatusNamingTheVariableNotAnException) {
  const auto good = AsMap(WorkerEnvironment(SampleLaunch(), {}));
  const std::vector<std::pair<std::string, std::string>> damaged = {
      {"SRAY_WORKER_RANK", "seven"},      {"SRAY_WORKER_RANK", "12x"},
      {"SRAY_WORKER_MANAGER_RANK", ""},   {"SRAY_WORKER_MANAGER_ADDRESS", "abc"},
      {"SRAY_WORKER_HEAD_ADDRESS", "zz"}, {"SRAY_WORKER_SECRET", "00ff"},
      {"SRAY_WORKER_PARENT", "-1"},       {"SRAY_WORKER_HEAD_RANK", "99999999999"},
  };
  for (const auto& [variable, value] : damaged) {
    auto variables = good;
    variables[variable] = value;
    Result<WorkerLaunch> read = Status::Internal("not read");
    ASSERT_NO_THROW(read = ReadFrom(variables)) << variable << "=" << value;
    ASSERT_FALSE(read.ok()) << variable << "=" << value << " was accepted";
    EXPECT_EQ(read.status().code(), StatusCode::kInvalidArgument);
    EXPECT_TRUE(read.status().message().starts_with(variable)) << read.status().message();
  }
  auto missing = good;
  missing.erase("SRAY_WORKER_PARENT");
  auto read = ReadFrom(missing);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().message().find("SRAY_WORKER_PARENT is not set"), 0u)
      << read.status().message();
}

}  // namespace
}  // namespace sray::core
