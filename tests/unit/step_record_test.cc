#include "jobsetup/step_record.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "common/process_stat.h"
#include "test_processes.h"

namespace sray::jobsetup {
namespace {

StepRecord RecordOfThisProcess() {
  return {.daemon_pid = ::getpid(),
          .daemon_start_time = ProcessStartTime(::getpid()),
          .uid = 1234,
          .gid = 567,
          .groups = {567, 890},
          .job_id = "42",
          .step_id = "0",
          .node_id = 2,
          .session_directory = "/tmp/sray-1234-42.0"};
}

using sray::testing::PidOfAnEndedProcess;

class StepRecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    state_ = std::filesystem::temp_directory_path() /
             ("sray-step-record-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(state_);
  }
  void TearDown() override { std::filesystem::remove_all(state_); }
  std::filesystem::path state_;
};

TEST(StepRecordCodec, ARecordComesBackFieldForField) {
  const StepRecord written = RecordOfThisProcess();
  auto read = DecodeStepRecord(EncodeStepRecord(written));
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->daemon_pid, written.daemon_pid);
  EXPECT_EQ(read->daemon_start_time, written.daemon_start_time);
  EXPECT_EQ(read->uid, 1234U);
  EXPECT_EQ(read->gid, 567U);
  EXPECT_EQ(read->groups, written.groups);
  EXPECT_EQ(read->job_id, "42");
  EXPECT_EQ(read->step_id, "0");
  EXPECT_EQ(read->node_id, 2U);
  EXPECT_EQ(read->session_directory, "/tmp/sray-1234-42.0");
}

TEST(StepRecordCodec, RejectsTruncatedForeignAndDangerousRecords) {
  const std::string bytes = EncodeStepRecord(RecordOfThisProcess());
  for (std::size_t length = 0; length < bytes.size(); ++length) {
    EXPECT_FALSE(DecodeStepRecord(std::string_view(bytes).substr(0, length)).ok()) << length;
  }
  EXPECT_FALSE(DecodeStepRecord(bytes + "x").ok());
  EXPECT_FALSE(DecodeStepRecord("sray-node-setup-1").ok());
  StepRecord relative = RecordOfThisProcess();
  relative.session_directory = "sray-1234-42.0";
  EXPECT_FALSE(DecodeStepRecord(EncodeStepRecord(relative)).ok());
  StepRecord escaping = RecordOfThisProcess();
  escaping.job_id = "../etc";
  EXPECT_FALSE(DecodeStepRecord(EncodeStepRecord(escaping)).ok());
}

TEST_F(StepRecordTest, DirectoriesArePrivateAndAPlantedOneIsRefused) {
  auto directory = PrepareRecordDirectory(state_, "n2");
  ASSERT_TRUE(directory.ok()) << directory.status().message();
  EXPECT_EQ(*directory, state_ / "n2");
  for (const auto& path : {state_, state_ / "n2"}) {
    struct stat info {};
    ASSERT_EQ(::stat(path.c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 07777, 0700U) << path;
  }
  EXPECT_TRUE(PrepareRecordDirectory(state_, "n2").ok());  // again: accepted
  ASSERT_EQ(::chmod((state_ / "n2").c_str(), 0777), 0);
  EXPECT_FALSE(PrepareRecordDirectory(state_, "n2").ok());
  EXPECT_FALSE(PrepareRecordDirectory(state_, "..").ok());
  EXPECT_FALSE(PrepareRecordDirectory(state_, "a/b").ok());
}

TEST_F(StepRecordTest, OnlyRecordsOfDaemonsThatNoLongerRunAreStale) {
  auto directory = PrepareRecordDirectory(state_, "n1");
  ASSERT_TRUE(directory.ok());
  StepRecord live = RecordOfThisProcess();
  StepRecord dead = RecordOfThisProcess();
  dead.step_id = "1";
  dead.daemon_pid = PidOfAnEndedProcess();
  // This pid, but another start: the daemon ended and its pid was reused.
  StepRecord reused = RecordOfThisProcess();
  reused.step_id = "2";
  reused.daemon_start_time += 1;
  for (const auto& record : {live, dead, reused}) {
    ASSERT_TRUE(WriteStepRecord(*directory, record).ok());
  }
  std::ofstream(*directory / "42.3.tmp") << "being written";

  auto stale = FindStaleStepRecords(*directory);
  ASSERT_TRUE(stale.ok()) << stale.status().message();
  std::set<std::string> names;
  for (const auto& entry : *stale) {
    ASSERT_TRUE(entry.record.ok()) << entry.record.status().message();
    names.insert(entry.file.filename().string());
  }
  EXPECT_EQ(names, (std::set<std::string>{"42.1", "42.2"}));

  ASSERT_TRUE(RemoveStepRecord(*directory, "42", "1").ok());
  EXPECT_TRUE(RemoveStepRecord(*directory, "42", "1").ok());  // gone already
  EXPECT_EQ(FindStaleStepRecords(*directory)->size(), 1U);
}

TEST_F(StepRecordTest, CorruptAndForeignFilesAreStaleWithTheReason) {
  auto directory = PrepareRecordDirectory(state_, "n1");
  ASSERT_TRUE(directory.ok());
  {
    std::ofstream corrupt(*directory / "7.0");
    corrupt << "not a record";
  }
  ::chmod((*directory / "7.0").c_str(), 0600);
  ASSERT_TRUE(WriteStepRecord(*directory, RecordOfThisProcess()).ok());
  ::chmod((*directory / "42.0").c_str(), 0644);  // readable by others: not sray's

  auto stale = FindStaleStepRecords(*directory);
  ASSERT_TRUE(stale.ok());
  ASSERT_EQ(stale->size(), 2U);
  for (const auto& entry : *stale) {
    ASSERT_FALSE(entry.record.ok()) << entry.file;
    const std::string why = entry.record.status().message();
    EXPECT_TRUE(why.find("corrupt step record") != std::string::npos ||
                why.find("not written by sray") != std::string::npos)
        << why;
  }
}

TEST_F(StepRecordTest, AMissingDirectoryHasNoRecords) {
  auto stale = FindStaleStepRecords(state_ / "nowhere");
  ASSERT_TRUE(stale.ok());
  EXPECT_TRUE(stale->empty());
}

}  // namespace
}  // namespace sray::jobsetup
