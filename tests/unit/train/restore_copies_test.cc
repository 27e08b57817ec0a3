// Checkpoint copies restored for training workers: a worker killed with its
// group never removes its own, so the next worker on the node does.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "../test_files.h"
#include "../test_processes.h"
#include "train/worker_session.h"

namespace sray::train::internal {
namespace {

// Before: each failed attempt left its killed workers' copies (a whole
// checkpoint each) in the session directory until the step ended.
TEST(RestoreCopies, ThoseOfEndedWorkersGoAndALiveWorkersStay) {
  sray::testing::ScratchDirectory scratch;
  const auto ended = scratch.path() / ("train-restore-rank1-" +
                                       std::to_string(sray::testing::PidOfAnEndedProcess()));
  const auto live = scratch.path() / ("train-restore-rank0-" + std::to_string(::getpid()));
  const auto unrelated = scratch.path() / "train";
  for (const auto& directory : {ended, live, unrelated}) {
    std::filesystem::create_directories(directory / "checkpoint_000001");
  }
  RemoveRestoreCopiesOfEndedWorkers(scratch.path().string());
  EXPECT_FALSE(std::filesystem::exists(ended));
  EXPECT_TRUE(std::filesystem::exists(live / "checkpoint_000001"));
  EXPECT_TRUE(std::filesystem::exists(unrelated / "checkpoint_000001"));
}

}  // namespace
}  // namespace sray::train::internal
