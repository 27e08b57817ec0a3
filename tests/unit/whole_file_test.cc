#include "common/whole_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

namespace sray {
namespace {

TEST(ReadWholeFile, ReadsAFileLargerThanOneRead) {
  const std::string path = ::testing::TempDir() + "/whole_file_" + std::to_string(::getpid());
  std::string written;
  for (int line = 0; written.size() < 100000; ++line)
    written += "line " + std::to_string(line) + "\n";
  std::ofstream(path, std::ios::binary) << written;
  const std::optional<std::string> read = ReadWholeFile(path);
  std::remove(path.c_str());
  ASSERT_TRUE(read.has_value());
  EXPECT_EQ(*read, written);
}

TEST(ReadWholeFile, ReadsAProcFileWhoseSizeIsNotKnownAhead) {
  const std::optional<std::string> maps = ReadWholeFile("/proc/self/maps");
  ASSERT_TRUE(maps.has_value());
  EXPECT_NE(maps->find("[stack]"), std::string::npos);
  EXPECT_EQ(maps->back(), '\n');
}

TEST(ReadWholeFile, AMissingFileIsNoValue) {
  EXPECT_FALSE(ReadWholeFile("/proc/0/no-such-file").has_value());
  EXPECT_FALSE(ReadWholeFile("/nonexistent/whole_file").has_value());
}

TEST(ReadWholeFile, ADirectoryIsNoValue) {
  EXPECT_FALSE(ReadWholeFile("/proc/self").has_value());
}

}  // namespace
}  // namespace sray
