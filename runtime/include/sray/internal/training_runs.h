#pragma once

// How sray::train tells the driver's runtime about its runs, so that the
// job's dashboard can show them (config, every report, restarts, the end)
// while they train. Called by the trainer on the driver; not for users.
//
// Thread-safety: every function may be called from any thread.

#include <cstdint>
#include <map>
#include <string>

namespace sray::internal {

struct TrainingRunStart {
  std::string name;          // RunConfig::name: one run per name in a job
  std::string storage_path;  // where its checkpoints and metrics.jsonl go
  int num_workers = 0;
  bool use_gpu = false;
};

struct TrainingReport {
  std::string name;
  std::uint64_t report = 0;  // 1, 2, ... across restarts
  int attempt = 0;           // group restarts before it
  double unix_time = 0;
  double seconds = 0;         // since rank 0's previous report
  std::uint64_t samples = 0;  // over all workers since the previous report
  std::map<std::string, double> metrics;
  std::string checkpoint;  // empty: none came with it
};

void RecordTrainingStart(const TrainingRunStart& start);
void RecordTrainingReport(const TrainingReport& report);
// The group was restarted, `restarts` times in all so far: a group that
// fails before its first report restarts too.
void RecordTrainingRestart(const std::string& name, int restarts);
// `outcome`: "finished", or "failed: <why>".
void RecordTrainingEnd(const std::string& name, const std::string& outcome);

}  // namespace sray::internal
