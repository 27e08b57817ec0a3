#pragma once

// How the driver tells people about a run: one line per report on standard
// output (readable in a terminal and in a Slurm output file), and every
// report as one JSON object per line in storage_path/name/metrics.jsonl,
// where a dashboard can read the history. Free of LibTorch.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "common/status.h"
#include "sray/train/config.h"

namespace sray::train::internal {

struct ReportRecord {
  std::uint64_t report = 0;      // 1, 2, ... across restarts
  int attempt = 0;               // group restarts before this report
  double unix_time = 0;          // when the driver received it
  double seconds = 0;            // rank 0's time since its previous report
  std::uint64_t samples = 0;     // DistributedSampler indices over all workers
  Metrics metrics;
  std::optional<std::string> checkpoint;  // checkpoint_NNNNNN, when one came with it
};

// "sray train NAME: report 3: accuracy=0.8812 loss=0.3301 | 1,912 samples/s | checkpoint_000002"
std::string ProgressLine(const std::string& name, const ReportRecord& record);
std::string JsonLine(const ReportRecord& record);
// Appends one line and flushes it to the file.
Status AppendLine(const std::string& path, const std::string& line);
// The metrics each checkpoint was reported with, by its directory's name
// (checkpoint_NNNNNN), read back from a metrics.jsonl: a later Fit in the
// same run directory ranks the earlier checkpoints by their scores. A value
// JSON could not hold (written as null) reads as NaN, which ranks as no
// score; unreadable lines are skipped; a missing file gives nothing.
std::map<std::string, Metrics> CheckpointMetricsFromLog(const std::string& path);

}  // namespace sray::train::internal
