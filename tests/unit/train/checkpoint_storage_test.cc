#include "train/checkpoint_storage.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <limits>

#include <filesystem>
#include <fstream>
#include <map>

#include "../test_files.h"
#include "sray/errors.h"
#include "sray/train/checkpoint.h"

namespace sray::train::internal {
namespace {

namespace fs = std::filesystem;

CheckpointFiles SomeFiles(const std::string& tag, int count = 3) {
  CheckpointFiles files;
  files.files.push_back({"nested/", 0755, {}});
  for (int index = 0; index < count; ++index) {
    files.files.push_back({"nested/file" + std::to_string(index), 0644, tag + std::to_string(index)});
  }
  files.files.push_back({"model.pt", 0600, std::string("\0binary\xff", 8) + tag});
  return files;
}

std::string Contents(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

TEST(CheckpointStorage, MergesEveryWorkersPartAndKeepsTheLowerRankOnAClash) {
  std::vector<CheckpointPart> parts(2);
  parts[0].files.files = {{"model.pt", 0600, "rank0 model"},
                          {"shared/", 0755, {}},
                          {"shared/rank0", 0644, "a"},
                          {"taken", 0644, "rank0 file"}};
  parts[1].files.files = {{"model.pt", 0600, "rank1 model"},
                          {"optimizer-rank1.pt", 0600, "rank1 state"},
                          {"shared/", 0700, {}},
                          {"shared/rank1", 0644, "b"},
                          {"taken/", 0755, {}},
                          {"taken/inside", 0644, "cannot sit under rank 0's file"}};
  sray::testing::ScratchDirectory scratch;
  auto stored = StoreCheckpointParts(scratch.path().string(), 0, std::move(parts));
  ASSERT_TRUE(stored.ok()) << stored.status().message();
  auto read = ReadCheckpointDirectory(*stored);
  ASSERT_TRUE(read.ok()) << read.status().message();
  std::map<std::string, std::string> by_path;
  for (const auto& file : read->files) by_path[file.path] = file.data;
  EXPECT_EQ(by_path.size(), 6U);
  EXPECT_EQ(by_path["model.pt"], "rank0 model");
  EXPECT_EQ(by_path["optimizer-rank1.pt"], "rank1 state");
  EXPECT_EQ(by_path["shared/rank0"], "a");
  EXPECT_EQ(by_path["shared/rank1"], "b");
  EXPECT_EQ(by_path["taken"], "rank0 file");
  EXPECT_FALSE(by_path.contains("taken/")) << "a directory over rank 0's file of that name";
  EXPECT_FALSE(by_path.contains("taken/inside"));
}

TEST(CheckpointStorage, ReadsBackWhatItWroteFileForFile) {
  sray::testing::ScratchDirectory scratch;
  const auto files = SomeFiles("a");
  ASSERT_TRUE(WriteCheckpointDirectory(files, (scratch.path() / "copy").string()).ok());
  auto read = ReadCheckpointDirectory((scratch.path() / "copy").string());
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_EQ(read->files.size(), files.files.size());
  for (const auto& file : files.files) {
    const auto found = std::find_if(read->files.begin(), read->files.end(),
                                    [&](const CheckpointFile& other) { return other.path == file.path; });
    ASSERT_NE(found, read->files.end()) << file.path;
    EXPECT_EQ(found->data, file.data);
    EXPECT_EQ(found->mode, file.mode);
  }
}

// A report travels as one msgpack message, whose strings stop short of
// 4 GiB: a larger file failed the report with msgpack's
// "container_size_overflow" and no word of what to do, on every restart.
// A sparse file of 4 GiB is refused by its size, unread.
TEST(CheckpointStorage, RefusesAFileTooLargeToReportNamingItAndTheFix) {
  sray::testing::ScratchDirectory scratch;
  fs::create_directories(scratch.path() / "large");
  { std::ofstream(scratch.path() / "large" / "model.pt").put('x'); }
  fs::resize_file(scratch.path() / "large" / "model.pt", kLargestCheckpointFileBytes + 1);
  auto read = ReadCheckpointDirectory((scratch.path() / "large").string());
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("model.pt is 4294967296 bytes"), std::string::npos)
      << read.status().message();
  EXPECT_NE(read.status().message().find("several files"), std::string::npos);
  EXPECT_NE(read.status().message().find("RunConfig::storage_path"), std::string::npos)
      << "or a storage path every node sees, where parts are staged instead of sent";
}

// Where a worker's node sees the run directory, its part is copied there
// (staged) and the driver moves the files into the checkpoint: merged with
// parts sent in memory by the same rule (the lower rank wins a clash), and
// nothing of the staged directory is left.
TEST(CheckpointStorage, StagedPartsAreMovedInAndMergedWithTheLowerRankWinning) {
  sray::testing::ScratchDirectory scratch;
  const std::string run = (scratch.path() / "run").string();
  fs::create_directories(run);
  const fs::path rank1 = scratch.path() / "rank1-checkpoint";
  fs::create_directories(rank1 / "shared");
  std::ofstream(rank1 / "model.pt") << "rank1 model";
  std::ofstream(rank1 / "optimizer-rank1.pt") << "rank1 state";
  std::ofstream(rank1 / "shared" / "rank1") << "b";
  fs::create_directories(rank1 / "taken");
  std::ofstream(rank1 / "taken" / "inside") << "cannot sit under rank 0's file";
  fs::permissions(rank1 / "optimizer-rank1.pt", fs::perms::owner_read | fs::perms::owner_write);
  auto staged = StageCheckpointDirectory(rank1.string(), run, "a0-rank1-1-42");
  ASSERT_TRUE(staged.ok()) << staged.status().message();
  EXPECT_TRUE(fs::is_directory(fs::path(run) / *staged));
  EXPECT_TRUE(ListCheckpoints(run).empty()) << "a staged part is no checkpoint";

  std::vector<CheckpointPart> parts(2);
  parts[0].files.files = {{"model.pt", 0600, "rank0 model"},
                          {"shared/", 0755, {}},
                          {"shared/rank0", 0644, "a"},
                          {"taken", 0644, "rank0 file"}};
  parts[1].staged = *staged;
  auto stored = StoreCheckpointParts(run, 0, std::move(parts));
  ASSERT_TRUE(stored.ok()) << stored.status().message();
  const fs::path checkpoint(*stored);
  EXPECT_EQ(Contents(checkpoint / "model.pt"), "rank0 model");
  EXPECT_EQ(Contents(checkpoint / "optimizer-rank1.pt"), "rank1 state");
  EXPECT_EQ(fs::status(checkpoint / "optimizer-rank1.pt").permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(Contents(checkpoint / "shared" / "rank0"), "a");
  EXPECT_EQ(Contents(checkpoint / "shared" / "rank1"), "b");
  EXPECT_EQ(Contents(checkpoint / "taken"), "rank0 file");
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(run))
    left.push_back(entry.path().filename().string());
  EXPECT_EQ(left, std::vector<std::string>{"checkpoint_000000"}) << "the staged part is gone";
  EXPECT_TRUE(fs::exists(rank1 / "model.pt")) << "the worker's own directory is only read";
}

// A staged part travels in no message: a file past the 4 GiB a sent part
// may hold is stored (moved, never read: a sparse file here).
TEST(CheckpointStorage, AStagedFileOfMoreThan4GiBIsStored) {
  sray::testing::ScratchDirectory scratch;
  const std::string run = scratch.path().string();
  const fs::path staged = scratch.path() / ".checkpoint_partial_staged_a0-rank0-1-7";
  fs::create_directories(staged);
  { std::ofstream(staged / "model.pt").put('x'); }
  fs::resize_file(staged / "model.pt", kLargestCheckpointFileBytes + 1);
  std::vector<CheckpointPart> parts(1);
  parts[0].staged = staged.filename().string();
  auto stored = StoreCheckpointParts(run, 3, std::move(parts));
  ASSERT_TRUE(stored.ok()) << stored.status().message();
  EXPECT_EQ(fs::file_size(fs::path(*stored) / "model.pt"), kLargestCheckpointFileBytes + 1);
  EXPECT_FALSE(fs::exists(staged));
}

// What staging refuses, and what a store refuses to take as a staged part.
TEST(CheckpointStorage, StagingRefusesLinksAndAStoreTakesOnlyStagedNames) {
  sray::testing::ScratchDirectory scratch;
  const std::string run = (scratch.path() / "run").string();
  fs::create_directories(run);
  fs::create_directories(scratch.path() / "with-link");
  fs::create_symlink("/etc/passwd", scratch.path() / "with-link" / "secret");
  auto staged =
      StageCheckpointDirectory((scratch.path() / "with-link").string(), run, "a0-rank0-1-1");
  ASSERT_FALSE(staged.ok());
  EXPECT_NE(staged.status().message().find("secret"), std::string::npos)
      << staged.status().message();
  EXPECT_TRUE(fs::is_empty(run)) << "nothing half-staged is left";
  EXPECT_FALSE(StageCheckpointDirectory((scratch.path() / "with-link").string(), run, "../x").ok());

  fs::create_directories(scratch.path() / "run" / "elsewhere");
  std::vector<CheckpointPart> parts(1);
  parts[0].staged = "elsewhere";
  EXPECT_FALSE(StoreCheckpointParts(run, 0, std::move(parts)).ok());
  EXPECT_TRUE(fs::exists(scratch.path() / "run" / "elsewhere")) << "not a staged part: left alone";
  parts.assign(1, {});
  parts[0].staged = ".checkpoint_partial_staged_x/../../outside";
  EXPECT_FALSE(StoreCheckpointParts(run, 0, std::move(parts)).ok());
}

// A worker killed while it staged, or a report that never came whole,
// leaves a staged part: the next sweep (each attempt, each Fit) removes it.
TEST(CheckpointStorage, TheSweepRemovesStagedPartsNoStoreTook) {
  sray::testing::ScratchDirectory scratch;
  const std::string run = scratch.path().string();
  const fs::path source = scratch.path() / "source";
  fs::create_directories(source);
  std::ofstream(source / "model.pt") << "x";
  auto staged = StageCheckpointDirectory(source.string(), run, "a1-rank2-3-99");
  ASSERT_TRUE(staged.ok());
  ASSERT_TRUE(StoreCheckpoint(run, 0, SomeFiles("kept")).ok());
  ASSERT_TRUE(RemovePartialCheckpoints(run).ok());
  EXPECT_FALSE(fs::exists(fs::path(run) / *staged));
  EXPECT_EQ(ListCheckpoints(run).size(), 1U);
}

// The driver's token in the run directory tells a worker it sees the same
// directory; another directory under that path, or another run's token, does not.
TEST(CheckpointStorage, OnlyTheRunsOwnTokenSaysTheDirectoryIsShared) {
  sray::testing::ScratchDirectory scratch;
  const std::string run = scratch.path().string();
  EXPECT_FALSE(SeesStorageMarker(run, "token-1")) << "no marker yet";
  ASSERT_TRUE(WriteStorageMarker(run, "token-1").ok());
  EXPECT_TRUE(SeesStorageMarker(run, "token-1"));
  EXPECT_FALSE(SeesStorageMarker(run, "token-2"));
  EXPECT_FALSE(SeesStorageMarker(run, ""));
  EXPECT_FALSE(SeesStorageMarker((scratch.path() / "other").string(), "token-1"));
  ASSERT_TRUE(WriteStorageMarker(run, "token-2").ok()) << "a later Fit's token replaces it";
  EXPECT_FALSE(SeesStorageMarker(run, "token-1"));
  ASSERT_TRUE(RemoveStorageMarker(run).ok());
  EXPECT_FALSE(SeesStorageMarker(run, "token-2"));
}

// A restore copy read straight from storage is the stored checkpoint.
TEST(CheckpointStorage, CopiesAStoredCheckpointFileForFile) {
  sray::testing::ScratchDirectory scratch;
  auto stored = StoreCheckpoint(scratch.path().string(), 0, SomeFiles("s"));
  ASSERT_TRUE(stored.ok());
  const std::string copy = (scratch.path() / "restore" / "checkpoint_000000").string();
  ASSERT_TRUE(CopyCheckpointDirectory(*stored, copy).ok());
  auto original = ReadCheckpointDirectory(*stored);
  auto copied = ReadCheckpointDirectory(copy);
  ASSERT_TRUE(original.ok() && copied.ok());
  ASSERT_EQ(copied->files.size(), original->files.size());
  for (std::size_t index = 0; index < original->files.size(); ++index) {
    EXPECT_EQ(copied->files[index].path, original->files[index].path);
    EXPECT_EQ(copied->files[index].data, original->files[index].data);
    EXPECT_EQ(copied->files[index].mode, original->files[index].mode);
  }
  EXPECT_FALSE(CopyCheckpointDirectory(*stored, copy).ok())
      << "an existing copy is never overwritten";
}

TEST(CheckpointStorage, RefusesLinksAndPathsLeavingTheDirectory) {
  sray::testing::ScratchDirectory scratch;
  fs::create_directories(scratch.path() / "with-link");
  fs::create_symlink("/etc/passwd", scratch.path() / "with-link" / "secret");
  auto read = ReadCheckpointDirectory((scratch.path() / "with-link").string());
  ASSERT_FALSE(read.ok());
  EXPECT_NE(read.status().message().find("secret"), std::string::npos);

  CheckpointFiles escaping;
  escaping.files.push_back({"../escaped", 0644, "x"});
  const Status written = WriteCheckpointDirectory(escaping, (scratch.path() / "out").string());
  EXPECT_FALSE(written.ok());
  EXPECT_FALSE(fs::exists(scratch.path() / "escaped"));
}

TEST(CheckpointStorage, StoresCheckpointsUnderNumberedNamesAndListsThemInOrder) {
  sray::testing::ScratchDirectory scratch;
  const std::string run = scratch.path().string();
  for (std::uint64_t index : {0U, 1U, 2U}) {
    auto stored = StoreCheckpoint(run, index, SomeFiles(std::to_string(index)));
    ASSERT_TRUE(stored.ok()) << stored.status().message();
    EXPECT_EQ(fs::path(*stored).filename(), CheckpointDirectoryName(index));
  }
  const auto listed = ListCheckpoints(run);
  ASSERT_EQ(listed.size(), 3U);
  EXPECT_EQ(listed.back().index, 2U);
  EXPECT_EQ(Contents(fs::path(listed.back().path) / "nested/file1"), "21");
  EXPECT_EQ(sray::train::LatestCheckpoint(run)->path(), listed.back().path);
  EXPECT_FALSE(StoreCheckpoint(run, 1, SomeFiles("again")).ok()) << "an existing checkpoint is never overwritten";
}

// A writer killed in the middle of a checkpoint (a real process, SIGKILL)
// leaves the previous checkpoint as the latest, and its partial directory is
// neither listed nor resumed; the next start removes it.
TEST(CheckpointStorage, AWriterKilledMidWriteLeavesThePreviousCheckpoint) {
  sray::testing::ScratchDirectory scratch;
  const std::string run = scratch.path().string();
  ASSERT_TRUE(StoreCheckpoint(run, 0, SomeFiles("old")).ok());
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t writer = ::fork();
  ASSERT_GE(writer, 0);
  if (writer == 0) {
    ::close(ready[0]);
    int files_written = 0;
    (void)StoreCheckpoint(run, 1, SomeFiles("new", 50), [&] {
      if (++files_written == 10) {
        (void)!::write(ready[1], "x", 1);
        ::pause();  // killed here, halfway
      }
    });
    ::_exit(0);
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  ASSERT_EQ(::kill(writer, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(writer, &status, 0), writer);
  ASSERT_TRUE(WIFSIGNALED(status));

  const auto listed = ListCheckpoints(run);
  ASSERT_EQ(listed.size(), 1U);
  EXPECT_EQ(listed.front().index, 0U);
  EXPECT_EQ(Contents(fs::path(listed.front().path) / "nested/file0"), "old0");
  std::size_t entries = 0;
  for (const auto& entry : fs::directory_iterator(run)) {
    (void)entry;
    ++entries;
  }
  EXPECT_EQ(entries, 2U) << "the checkpoint and the partial directory";
  ASSERT_TRUE(RemovePartialCheckpoints(run).ok());
  entries = 0;
  for (const auto& entry : fs::directory_iterator(run)) {
    (void)entry;
    ++entries;
  }
  EXPECT_EQ(entries, 1U);
  // Numbering goes on: the next checkpoint is stored without a clash.
  EXPECT_TRUE(StoreCheckpoint(run, 1, SomeFiles("next")).ok());
}

CheckpointConfig KeepBy(int num_to_keep, std::string attribute, std::string order) {
  CheckpointConfig config;
  config.num_to_keep = num_to_keep;
  config.score_attribute = std::move(attribute);
  config.score_order = std::move(order);
  return config;
}

TEST(CheckpointPruning, KeepsTheBestByScoreAndAlwaysTheLatest) {
  const std::vector<RankedCheckpoint> checkpoints{
      {0, {{"accuracy", 0.5}}}, {1, {{"accuracy", 0.9}}}, {2, {{"accuracy", 0.7}}}, {3, {{"accuracy", 0.6}}}};
  EXPECT_EQ(CheckpointsToRemove(checkpoints, KeepBy(2, "accuracy", "max")), (std::vector<std::uint64_t>{0}));
  EXPECT_EQ(CheckpointsToRemove(checkpoints, KeepBy(1, "accuracy", "max")), (std::vector<std::uint64_t>{2, 0}));
  EXPECT_EQ(CheckpointsToRemove(checkpoints, KeepBy(2, "accuracy", "min")), (std::vector<std::uint64_t>{2, 1}));
  const auto best = BestFirst(checkpoints, KeepBy(0, "accuracy", "max"));
  EXPECT_EQ(best.front().index, 1U);
  EXPECT_EQ(best.back().index, 0U);
}

TEST(CheckpointPruning, KeepsTheNewestWithoutAScoreAndEverythingWithZero) {
  const std::vector<RankedCheckpoint> checkpoints{{0, {}}, {1, {}}, {2, {}}, {3, {}}};
  EXPECT_EQ(CheckpointsToRemove(checkpoints, KeepBy(2, "", "max")), (std::vector<std::uint64_t>{1, 0}));
  EXPECT_TRUE(CheckpointsToRemove(checkpoints, KeepBy(0, "", "max")).empty());
}

TEST(CheckpointPruning, RanksCheckpointsWithoutTheScoreLast) {
  const std::vector<RankedCheckpoint> checkpoints{{0, {{"loss", 0.1}}}, {1, {}}, {2, {{"loss", 0.3}}}, {3, {{"loss", 0.2}}}};
  EXPECT_EQ(CheckpointsToRemove(checkpoints, KeepBy(2, "loss", "min")), (std::vector<std::uint64_t>{2, 1}));
}

// Before: a NaN loss compared equal to every score, broke the sort's
// ordering, and the diverged checkpoint was kept while the best one went.
TEST(CheckpointPruning, ANaNScoreRanksAsNoScoreAndNeverDisplacesTheBest) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<RankedCheckpoint> checkpoints{
      {0, {{"loss", nan}}}, {1, {{"loss", 0.5}}}, {2, {{"loss", 0.9}}}};
  // The best (1) and the latest (2) stay; the NaN one goes.
  EXPECT_EQ(CheckpointsToRemove(checkpoints, KeepBy(1, "loss", "min")),
            (std::vector<std::uint64_t>{0}));
  const auto best = BestFirst(checkpoints, KeepBy(0, "loss", "min"));
  EXPECT_EQ(best.front().index, 1U);
  EXPECT_EQ(best.back().index, 0U);
}

TEST(CheckpointPruning, RefusesABadOrderOrCount) {
  EXPECT_FALSE(ValidateCheckpointConfig(KeepBy(1, "loss", "lowest")).ok());
  EXPECT_FALSE(ValidateCheckpointConfig(KeepBy(-1, "", "max")).ok());
  EXPECT_TRUE(ValidateCheckpointConfig(KeepBy(3, "loss", "min")).ok());
}

TEST(Checkpoint, FromDirectoryRefusesWhatIsNotADirectory) {
  EXPECT_THROW(sray::train::Checkpoint::FromDirectory("/nonexistent/checkpoint"), sray::ConfigError);
}

}  // namespace
}  // namespace sray::train::internal
