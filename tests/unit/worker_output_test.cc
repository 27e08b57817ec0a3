#include "core/worker_output.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/worker_log_files.h"

namespace sray::core {
namespace {

std::string ReadAll(int descriptor) {
  std::string text;
  char buffer[4096];
  ssize_t got = 0;
  while ((got = ::read(descriptor, buffer, sizeof(buffer))) > 0)
    text.append(buffer, static_cast<std::size_t>(got));
  return text;
}

class WorkerOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() /
                 ("sray-worker-output-test-" + std::to_string(::getpid()));
    ASSERT_EQ(::pipe2(driver_, O_CLOEXEC), 0);
  }
  void TearDown() override {
    ::close(driver_[0]);
    std::filesystem::remove_all(directory_);
  }
  std::filesystem::path directory_;
  int driver_[2] = {-1, -1};
};

TEST_F(WorkerOutputTest, LinesGoToTheWorkersLogAndPrefixedToTheDriver) {
  {
    auto output = WorkerOutput::Start({.directory = directory_,
                                       .node_id = 2,
                                       .to_driver = true,
                                       .file_limit = 1 << 20,
                                       .driver_stdout = driver_[1],
                                       .driver_stderr = driver_[1]});
    ASSERT_TRUE(output.ok()) << output.status().message();
    auto pipes = (*output)->Open(5);
    ASSERT_TRUE(pipes.ok());
    ASSERT_EQ(::write(pipes->stdout_fd, "hello\nunfinished", 16), 16);
    ASSERT_EQ(::write(pipes->stderr_fd, "oops\n", 5), 5);
    (*output)->Started(5, *pipes, 123);  // closes the write ends: EOF for the reader
  }                                      // drains and stops
  ::close(driver_[1]);
  const std::string forwarded = ReadAll(driver_[0]);
  EXPECT_NE(forwarded.find(") hello\n"), std::string::npos) << forwarded;
  EXPECT_NE(forwarded.find(") unfinished\n"), std::string::npos) << forwarded;  // at EOF
  EXPECT_NE(forwarded.find(") oops\n"), std::string::npos) << forwarded;
  EXPECT_EQ(forwarded.rfind("(node 2 worker 5 pid ", 0), 0U) << forwarded;
  std::ifstream log(directory_ / "worker-5.log");
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_NE(text.str().find("hello\n"), std::string::npos);
  EXPECT_NE(text.str().find("oops\n"), std::string::npos);
  EXPECT_EQ(text.str().find("(node"), std::string::npos);  // no prefix in the file

  const auto files = ListWorkerLogs(directory_);
  ASSERT_EQ(files.size(), 1U);
  EXPECT_EQ(files[0].rank, 5U);
  EXPECT_EQ(files[0].size, text.str().size());
  auto tail = ReadWorkerLog(directory_, 5, -1, 5);
  ASSERT_TRUE(tail.ok());
  EXPECT_EQ(tail->data, text.str().substr(text.str().size() - 5));
  auto from = ReadWorkerLog(directory_, 5, 0, 1 << 20);
  EXPECT_EQ(from->data, text.str());
  EXPECT_EQ(from->size, text.str().size());
  EXPECT_FALSE(ReadWorkerLog(directory_, 6, 0, 10).ok());
}

TEST_F(WorkerOutputTest, AFullLogMovesToDotOneAndTheNewestLinesStay) {
  {
    auto output = WorkerOutput::Start({.directory = directory_,
                                       .node_id = 0,
                                       .to_driver = false,
                                       .file_limit = 100,
                                       .driver_stdout = driver_[1],
                                       .driver_stderr = driver_[1]});
    ASSERT_TRUE(output.ok());
    auto pipes = (*output)->Open(9);
    ASSERT_TRUE(pipes.ok());
    for (int line = 0; line < 30; ++line) {
      const std::string text = "line " + std::to_string(line) + "\n";
      ASSERT_EQ(::write(pipes->stdout_fd, text.data(), text.size()),
                static_cast<ssize_t>(text.size()));
    }
    (*output)->Started(9, *pipes, 1);
  }
  ::close(driver_[1]);
  EXPECT_EQ(ReadAll(driver_[0]), "");  // to_driver = false
  EXPECT_LE(std::filesystem::file_size(directory_ / "worker-9.log"), 100U);
  EXPECT_TRUE(std::filesystem::exists(directory_ / "worker-9.log.1"));
  std::ifstream log(directory_ / "worker-9.log");
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_NE(text.str().find("line 29\n"), std::string::npos) << text.str();
}

}  // namespace
}  // namespace sray::core
