#include "train/progress_log.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "../test_files.h"

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

TEST(ProgressLog, AppendToAnUnwritablePlaceSaysWhere) {
  const Status status = AppendLine("/proc/version/metrics.jsonl", "{}");
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("/proc/version/metrics.jsonl"), std::string::npos);
}

}  // namespace
}  // namespace sray::train::internal
