#include "core/worker_output.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/worker_log_files.h"
#include "core/event_log.h"

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

// What workers print may be private: their logs' directory is the job user's alone.
TEST_F(WorkerOutputTest, TheLogDirectoryIsTheJobUsersAlone) {
  auto output = WorkerOutput::Start({.directory = directory_ / "logs",
                                     .node_id = 0,
                                     .to_driver = false,
                                     .file_limit = 1 << 20,
                                     .driver_stdout = driver_[1],
                                     .driver_stderr = driver_[1],
                                     .kept_in = {}});
  ASSERT_TRUE(output.ok()) << output.status().message();
  struct stat info {};
  ASSERT_EQ(::stat((directory_ / "logs").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0700U);
}

TEST_F(WorkerOutputTest, LinesGoToTheWorkersLogAndPrefixedToTheDriver) {
  {
    auto output = WorkerOutput::Start({.directory = directory_,
                                       .node_id = 2,
                                       .to_driver = true,
                                       .file_limit = 1 << 20,
                                       .driver_stdout = driver_[1],
                                       .driver_stderr = driver_[1],
                                       .kept_in = {}});
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
                                       .driver_stderr = driver_[1],
                                       .kept_in = {}});
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

TEST_F(WorkerOutputTest, UcxCrashReportStaysInTheLogAndTheDriverGetsOneLine) {
  // UCX's report as its error handler prints it on a SIGSEGV, then a line
  // printed after it (by a retry, say), which reaches the driver again.
  const std::string report =
      "before the crash\n"
      "[n1:4242 :0:4242] Caught signal 11 (Segmentation fault: address not mapped to object at "
      "address (nil))\n"
      "==== backtrace (tid:   4242) ====\n"
      " 0  /lib/x86_64-linux-gnu/libucs.so.0(ucs_handle_error+0x2e4) [0x7f0000001000]\n"
      " 1  /lib/x86_64-linux-gnu/libucs.so.0(+0x2f0) [0x7f0000002000]\n"
      "=================================\n"
      "after the report\n";
  {
    auto output = WorkerOutput::Start({.directory = directory_,
                                       .node_id = 1,
                                       .to_driver = true,
                                       .file_limit = 1 << 20,
                                       .driver_stdout = driver_[1],
                                       .driver_stderr = driver_[1],
                                       .kept_in = {}});
    ASSERT_TRUE(output.ok()) << output.status().message();
    auto pipes = (*output)->Open(3);
    ASSERT_TRUE(pipes.ok());
    ASSERT_EQ(::write(pipes->stderr_fd, report.data(), report.size()),
              static_cast<ssize_t>(report.size()));
    (*output)->Started(3, *pipes, 4242);
  }
  ::close(driver_[1]);
  const std::string forwarded = ReadAll(driver_[0]);
  const std::string log_path = (directory_ / "worker-3.log").string();
  EXPECT_EQ(
      forwarded,
      "(node 1 worker 3 pid 4242) before the crash\n"
      "sray: worker 3 (pid 4242) on node 1 crashed: caught signal 11 (Segmentation fault: "
      "address not mapped to object at address (nil)); its backtrace is in " +
          log_path +
          " while the job runs (`sray logs --worker 3`; --ray-cluster=log_dir=DIR keeps the logs "
          "after the job)\n"
          "(node 1 worker 3 pid 4242) after the report\n");
  std::ifstream log(log_path);
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_EQ(text.str(), report);  // the whole report is kept in the worker's log
}

TEST_F(WorkerOutputTest, OnlyStderrLinesInUcxFormatStartACrashReport) {
  const std::string printed = "[my tag] Caught signal handling is a feature\n";
  {
    auto output = WorkerOutput::Start({.directory = directory_,
                                       .node_id = 0,
                                       .to_driver = true,
                                       .file_limit = 1 << 20,
                                       .driver_stdout = driver_[1],
                                       .driver_stderr = driver_[1],
                                       .kept_in = {}});
    ASSERT_TRUE(output.ok());
    auto pipes = (*output)->Open(1);
    ASSERT_TRUE(pipes.ok());
    // On stdout, a user's line is never taken for a report.
    ASSERT_EQ(::write(pipes->stdout_fd, printed.data(), printed.size()),
              static_cast<ssize_t>(printed.size()));
    (*output)->Started(1, *pipes, 7);
  }
  ::close(driver_[1]);
  EXPECT_EQ(ReadAll(driver_[0]), "(node 0 worker 1 pid 7) " + printed);
}

TEST(WorkerLogFiles, ACopyHoldsEveryLogRotatedOnesTooPrivateToTheUser) {
  const auto root =
      std::filesystem::temp_directory_path() / ("sray-log-copy-test-" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root / "logs");
  std::ofstream(root / "logs" / "worker-5.log") << "newest\n";
  std::ofstream(root / "logs" / "worker-5.log.1") << "older\n";
  std::ofstream(root / "logs" / "notes.txt") << "not a log\n";
  ASSERT_TRUE(CopyWorkerLogs(root / "logs", root / "kept" / "7.0" / "node-1").ok());
  const auto kept = root / "kept" / "7.0" / "node-1";
  EXPECT_EQ(std::filesystem::status(kept).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_all);
  EXPECT_EQ(
      std::filesystem::status(kept / "worker-5.log").permissions() & std::filesystem::perms::all,
      std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  EXPECT_TRUE(std::filesystem::exists(kept / "worker-5.log.1"));
  EXPECT_FALSE(std::filesystem::exists(kept / "notes.txt"));
  auto read = ReadWorkerLog(kept, 5, 0, 100);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->data, "newest\n");
  const Status missing = CopyWorkerLogs(root / "nothing", root / "kept2");
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("nothing"), std::string::npos) << missing.message();
  std::filesystem::remove_all(root);
}

TEST(SpillEvents, TheFirstSpillIsToldAtOnceLaterOnesAddedUpUntilRead) {
  auto events = std::make_shared<EventLog>();
  SpillEvents spills(2, events);
  spills.Spilled(1000);
  spills.Spilled(500);
  spills.Spilled(250);
  ASSERT_EQ(events->Recent().size(), 1u);
  EXPECT_EQ(events->Recent()[0].kind, "objects_spilled");
  EXPECT_EQ(events->Recent()[0].message.find("node 2 spilled 1 object(s), 1000 bytes"), 0u)
      << events->Recent()[0].message;
  spills.Flush();
  ASSERT_EQ(events->Recent().size(), 2u);
  EXPECT_EQ(events->Recent()[1].message.find("node 2 spilled 2 object(s), 750 bytes"), 0u)
      << events->Recent()[1].message;
  spills.Flush();
  EXPECT_EQ(events->Recent().size(), 2u) << "nothing new, nothing told";
}

}  // namespace
}  // namespace sray::core
