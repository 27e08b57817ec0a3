#include "train/progress_log.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "../test_files.h"
#include "train/checkpoint_storage.h"

namespace sray::train::internal {
namespace {

TEST(ProgressLog, PrintsOneReadableLinePerReport) {
  ReportRecord record;
  record.report = 3;
  record.seconds = 2;
  record.samples = 3824;
  record.metrics = {{"loss", 0.33012}, {"epoch", 2}};
  record.checkpoint = "checkpoint_000002";
  EXPECT_EQ(ProgressLine("mnist", record),
            "sray train mnist: report 3: epoch=2 loss=0.3301 | 1,912 samples/s | checkpoint_000002");
  record.attempt = 1;
  record.samples = 0;
  record.checkpoint.reset();
  EXPECT_EQ(ProgressLine("mnist", record), "sray train mnist: report 3: epoch=2 loss=0.3301 | restart 1");
}

TEST(ProgressLog, WritesJsonLinesAndNullForValuesJsonCannotHold) {
  sray::testing::ScratchDirectory scratch;
  const std::string path = (scratch.path() / "metrics.jsonl").string();
  ReportRecord record;
  record.report = 1;
  record.metrics = {{"loss", std::nan("")}, {"accuracy", 0.5}};
  ASSERT_TRUE(AppendLine(path, JsonLine(record)).ok());
  record.report = 2;
  ASSERT_TRUE(AppendLine(path, JsonLine(record)).ok());
  std::ifstream file(path);
  std::string line;
  int lines = 0;
  while (std::getline(file, line)) {
    const auto parsed = nlohmann::json::parse(line);
    EXPECT_EQ(parsed["report"], ++lines);
    EXPECT_TRUE(parsed["metrics"]["loss"].is_null());
    EXPECT_EQ(parsed["metrics"]["accuracy"], 0.5);
    EXPECT_TRUE(parsed["checkpoint"].is_null());
  }
  EXPECT_EQ(lines, 2);
}

// Before: a resumed run ranked the earlier Fit's checkpoints as unscored,
// and pruning by score deleted that run's best checkpoint.
TEST(ProgressLog, ACheckpointsMetricsAreReadBackForALaterFitsPruning) {
  sray::testing::ScratchDirectory scratch;
  const std::string path = (scratch.path() / "metrics.jsonl").string();
  auto report = [&](std::uint64_t number, double accuracy, std::optional<std::string> checkpoint) {
    ReportRecord record;
    record.report = number;
    record.metrics = {{"accuracy", accuracy}};
    record.checkpoint = std::move(checkpoint);
    ASSERT_TRUE(AppendLine(path, JsonLine(record)).ok());
  };
  report(1, 0.90, "checkpoint_000003");
  report(2, 0.95, std::nullopt);
  report(3, 0.80, "checkpoint_000005");
  report(4, std::nan(""), "checkpoint_000006");
  std::ofstream(path, std::ios::app) << "{\"report\": 5, \"metr";  // cut short by a crash
  const auto logged = CheckpointMetricsFromLog(path);
  ASSERT_EQ(logged.size(), 3U);
  EXPECT_EQ(logged.at("checkpoint_000003").at("accuracy"), 0.90);
  EXPECT_TRUE(std::isnan(logged.at("checkpoint_000006").at("accuracy")));

  // Resumed: checkpoint 7 at 0.70 with num_to_keep 2 by accuracy keeps the
  // best two (3, 5) and the latest (7); unscored, 3 and 5 went.
  CheckpointConfig keep;
  keep.num_to_keep = 2;
  keep.score_attribute = "accuracy";
  keep.score_order = "max";
  const std::vector<RankedCheckpoint> kept{{3, logged.at("checkpoint_000003")},
                                           {5, logged.at("checkpoint_000005")},
                                           {6, logged.at("checkpoint_000006")},
                                           {7, {{"accuracy", 0.70}}}};
  EXPECT_EQ(CheckpointsToRemove(kept, keep), (std::vector<std::uint64_t>{6}));
  EXPECT_TRUE(CheckpointMetricsFromLog((scratch.path() / "none.jsonl").string()).empty());
}

TEST(ProgressLog, AppendToAnUnwritablePlaceSaysWhere) {
  const Status status = AppendLine("/proc/version/metrics.jsonl", "{}");
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("/proc/version/metrics.jsonl"), std::string::npos);
}

}  // namespace
}  // namespace sray::train::internal
