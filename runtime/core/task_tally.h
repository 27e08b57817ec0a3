#pragma once

// Tasks of a node by function and state, for the dashboard. The scheduler
// knows what waits and runs now; this keeps the count of attempts that
// ended here (finished or failed), which nothing else remembers, and the
// latest call counts of each actor on the node (by method, as
// "Class::Method"), which its worker sends.
//
// Thread-safety: none; the node manager's event loop only.

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/protocol.h"

namespace sray::core {

class TaskTally {
 public:
  // An outcome a node manager delivers for a task that ran (or could not
  // run) there: a value is finished, anything else a failed attempt.
  void Record(const TaskOutcome& outcome);
  // An actor's latest counts; they replace its earlier ones of the same
  // incarnation. Counts of an incarnation that ended are dropped (they may
  // arrive after its death).
  void RecordActorCalls(ActorCallTally tally);
  // An incarnation of the actor ended: its finished and failed calls stay
  // counted, none is queued or running, and a restart counts anew.
  void ActorEnded(std::uint64_t actor_id, std::int32_t incarnation);
  // Every function that ended here or is in `current` (queued and running
  // counts, by function), sorted by name.
  [[nodiscard]] std::vector<FunctionTasks> With(std::map<std::string, FunctionTasks> current) const;
  // How many ended actors' incarnations it remembers (at most kEndedActorsKept).
  [[nodiscard]] std::size_t EndedActorsRemembered() const { return next_incarnation_.size(); }

 private:
  struct Ended {
    std::uint64_t finished = 0;
    std::uint64_t failed = 0;
  };
  std::unordered_map<std::string, Ended> ended_;  // tasks, and calls of ended actors
  struct LiveActor {
    std::int32_t incarnation = 0;
    std::vector<FunctionTasks> methods;
  };
  std::unordered_map<std::uint64_t, LiveActor> actor_calls_;
  // Per actor, incarnations below this have ended: a tally its worker sent
  // just before the end is dropped when it comes after. Such a tally comes
  // within milliseconds, so only the actors that ended last are remembered
  // (oldest first in ended_order_), or a node whose job makes actors all day
  // would keep one entry per actor.
  static constexpr std::size_t kEndedActorsKept = 1'000;
  std::unordered_map<std::uint64_t, std::int32_t> next_incarnation_;
  std::deque<std::uint64_t> ended_order_;
};

}  // namespace sray::core
