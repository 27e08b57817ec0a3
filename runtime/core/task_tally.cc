#include "core/task_tally.h"

#include <algorithm>

namespace sray::core {

void TaskTally::Record(const TaskOutcome& outcome) {
  Ended& ended = ended_[outcome.function];
  const auto kind = static_cast<OutcomeKind>(outcome.kind);
  if (HoldsValue(kind)) {
    ++ended.finished;
  } else {
    ++ended.failed;
  }
}

void TaskTally::RecordActorCalls(ActorCallTally tally) {
  if (auto ended = next_incarnation_.find(tally.actor_id);
      ended != next_incarnation_.end() && tally.incarnation < ended->second) {
    return;
  }
  LiveActor& actor = actor_calls_[tally.actor_id];
  if (tally.incarnation < actor.incarnation) return;
  actor = LiveActor{tally.incarnation, std::move(tally.methods)};
}

void TaskTally::ActorEnded(std::uint64_t actor_id, std::int32_t incarnation) {
  auto [remembered, added] = next_incarnation_.try_emplace(actor_id, 0);
  remembered->second = std::max(remembered->second, incarnation + 1);
  if (added) {
    ended_order_.push_back(actor_id);
    if (ended_order_.size() > kEndedActorsKept) {
      next_incarnation_.erase(ended_order_.front());
      ended_order_.pop_front();
    }
  }
  auto found = actor_calls_.find(actor_id);
  if (found == actor_calls_.end() || found->second.incarnation > incarnation) return;
  for (const FunctionTasks& method : found->second.methods) {
    Ended& ended = ended_[method.function];
    ended.finished += method.finished;
    ended.failed += method.failed;
  }
  actor_calls_.erase(found);
}

std::vector<FunctionTasks> TaskTally::With(std::map<std::string, FunctionTasks> current) const {
  for (const auto& [function, ended] : ended_) {
    FunctionTasks& tasks = current[function];
    tasks.finished = ended.finished;
    tasks.failed = ended.failed;
  }
  for (const auto& [actor, live] : actor_calls_) {
    for (const FunctionTasks& method : live.methods) {
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
