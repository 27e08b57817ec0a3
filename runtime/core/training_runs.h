#pragma once

// The driver's record of training runs (sray/internal/training_runs.h
// writes it, the dashboard reads it): per run its start, up to
// kMaxReportsKept reports (the oldest dropped first), restarts and end.
//
// Thread-safety: every function may be called from any thread.

#include <cstddef>
#include <string>
#include <vector>

#include "sray/internal/training_runs.h"

namespace sray::core {

inline constexpr std::size_t kMaxReportsKept = 10000;

struct TrainingRunRecord {
  internal::TrainingRunStart start;
  double started_unix_time = 0;
  std::string state = "running";  // running, finished, failed: ...
  int restarts = 0;
  std::uint64_t reports_dropped = 0;
  std::vector<internal::TrainingReport> reports;
};

// Every run of this process so far, in start order.
std::vector<TrainingRunRecord> TrainingRuns();

}  // namespace sray::core
