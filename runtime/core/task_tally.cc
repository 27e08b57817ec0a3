#include "core/task_tally.h"

namespace sray::core {

void TaskTally::Record(const TaskOutcome& outcome) {
  Ended& ended = ended_[outcome.function];
  const auto kind = static_cast<OutcomeKind>(outcome.kind);
  if (kind == OutcomeKind::kInlineValue || kind == OutcomeKind::kStoredValue) {
    ++ended.finished;
  } else {
    ++ended.failed;
  }
}

std::vector<FunctionTasks> TaskTally::With(std::map<std::string, FunctionTasks> current) const {
  for (const auto& [function, ended] : ended_) {
    FunctionTasks& tasks = current[function];
    tasks.finished = ended.finished;
    tasks.failed = ended.failed;
  }
  std::vector<FunctionTasks> tasks;
  tasks.reserve(current.size());
  for (auto& [function, counts] : current) {
    counts.function = function;
    tasks.push_back(std::move(counts));
  }
  return tasks;
}

}  // namespace sray::core
