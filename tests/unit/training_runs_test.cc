#include "core/training_runs.h"

#include <gtest/gtest.h>

namespace sray::core {
namespace {

TEST(TrainingRuns, KeepEachRunsReportsRestartsAndEnd) {
  internal::RecordTrainingStart(
      {.name = "runs-test", .storage_path = "/x", .num_workers = 2, .use_gpu = false});
  internal::RecordTrainingReport({.name = "runs-test",
                                  .report = 1,
                                  .attempt = 0,
                                  .unix_time = 1,
                                  .seconds = 2,
                                  .samples = 100,
                                  .metrics = {{"loss", 1.0}},
                                  .checkpoint = ""});
  internal::RecordTrainingReport({.name = "runs-test",
                                  .report = 2,
                                  .attempt = 1,
                                  .unix_time = 2,
                                  .seconds = 2,
                                  .samples = 100,
                                  .metrics = {{"loss", 0.5}},
                                  .checkpoint = "checkpoint_000001"});
  internal::RecordTrainingReport({.name = "no-such-run",
                                  .report = 1,
                                  .attempt = 0,
                                  .unix_time = 1,
                                  .seconds = 1,
                                  .samples = 1,
                                  .metrics = {},
                                  .checkpoint = ""});
  internal::RecordTrainingEnd("runs-test", "finished");
  const auto runs = TrainingRuns();
  const TrainingRunRecord* found = nullptr;
  for (const auto& run : runs) {
    if (run.start.name == "runs-test") found = &run;
    EXPECT_NE(run.start.name, "no-such-run");
  }
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->state, "finished");
  EXPECT_EQ(found->restarts, 1);
  ASSERT_EQ(found->reports.size(), 2U);
  EXPECT_EQ(found->reports[1].metrics.at("loss"), 0.5);
  EXPECT_EQ(found->reports[1].checkpoint, "checkpoint_000001");
}

// A group that fails before its first report restarts all the same: the
// dashboard showed "0 restart(s)" through every restart of such a run.
TEST(TrainingRuns, CountRestartsOfAGroupThatNeverReported) {
  internal::RecordTrainingStart(
      {.name = "restarts-test", .storage_path = "/y", .num_workers = 2, .use_gpu = false});
  internal::RecordTrainingRestart("restarts-test", 1);
  internal::RecordTrainingRestart("restarts-test", 2);
  internal::RecordTrainingRestart("no-such-run", 5);
  internal::RecordTrainingEnd("restarts-test", "failed: worker 0 threw");
  const TrainingRunRecord* found = nullptr;
  const auto runs = TrainingRuns();
  for (const auto& run : runs) {
    if (run.start.name == "restarts-test") found = &run;
  }
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->restarts, 2);
  EXPECT_TRUE(found->reports.empty());
}

}  // namespace
}  // namespace sray::core
