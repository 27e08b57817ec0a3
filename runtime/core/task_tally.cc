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

void TaskTally::RecordActorCalls(ActorCallTally tally) {
  actor_calls_[tally.actor_id] = std::move(tally.methods);
}

void TaskTally::ActorEnded(std::uint64_t actor_id) {
  auto found = actor_calls_.find(actor_id);
  if (found == actor_calls_.end()) return;
  for (FunctionTasks& method : found->second) method.queued = method.running = 0;
}

std::vector<FunctionTasks> TaskTally::With(std::map<std::string, FunctionTasks> current) const {
  for (const auto& [function, ended] : ended_) {
    FunctionTasks& tasks = current[function];
    tasks.finished = ended.finished;
    tasks.failed = ended.failed;
  }
  for (const auto& [actor, methods] : actor_calls_) {
    for (const FunctionTasks& method : methods) {
      FunctionTasks& tasks = current[method.function];
      tasks.queued += method.queued;
      tasks.running += method.running;
      tasks.finished += method.finished;
      tasks.failed += method.failed;
    }
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
