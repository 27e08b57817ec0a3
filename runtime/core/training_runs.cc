#include "core/training_runs.h"

#include <algorithm>
#include <chrono>
#include <mutex>

namespace sray::core {
namespace {

struct Registry {
  std::mutex mutex;
  std::vector<TrainingRunRecord> runs;  // guarded by mutex
};

Registry& TheRegistry() {
  static Registry registry;
  return registry;
}

// The run named `name`, the newest if a name came back (a second Fit).
TrainingRunRecord* FindLocked(Registry& registry, const std::string& name) {
  for (auto run = registry.runs.rbegin(); run != registry.runs.rend(); ++run) {
    if (run->start.name == name) return &*run;
  }
  return nullptr;
}

}  // namespace

std::vector<TrainingRunRecord> TrainingRuns() {
  Registry& registry = TheRegistry();
  std::lock_guard lock(registry.mutex);
  return registry.runs;
}

}  // namespace sray::core

namespace sray::internal {

void RecordTrainingStart(const TrainingRunStart& start) {
  auto& registry = core::TheRegistry();
  core::TrainingRunRecord record;
  record.start = start;
  record.started_unix_time =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::lock_guard lock(registry.mutex);
  registry.runs.push_back(std::move(record));
}

void RecordTrainingReport(const TrainingReport& report) {
  auto& registry = core::TheRegistry();
  std::lock_guard lock(registry.mutex);
  core::TrainingRunRecord* run = core::FindLocked(registry, report.name);
  if (run == nullptr) return;
  run->restarts = std::max(run->restarts, report.attempt);
  if (run->reports.size() >= core::kMaxReportsKept) {
    run->reports.erase(run->reports.begin());
    run->reports_dropped++;
  }
  run->reports.push_back(report);
}

void RecordTrainingRestart(const std::string& name, int restarts) {
  auto& registry = core::TheRegistry();
  std::lock_guard lock(registry.mutex);
  if (core::TrainingRunRecord* run = core::FindLocked(registry, name)) {
    run->restarts = std::max(run->restarts, restarts);
  }
}

void RecordTrainingEnd(const std::string& name, const std::string& outcome) {
  auto& registry = core::TheRegistry();
  std::lock_guard lock(registry.mutex);
  if (core::TrainingRunRecord* run = core::FindLocked(registry, name)) run->state = outcome;
}

}  // namespace sray::internal
