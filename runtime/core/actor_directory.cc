#include "core/actor_directory.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sray::core {
namespace {

Status ValidateResources(const ResourceMap& resources, const std::string& what) {
  Status valid = sched::ValidateAmounts(resources);
  if (valid.ok()) return valid;
  return Status::InvalidArgument("sray: " + what + ": " + valid.message());
}

std::string Describe(const ResourceMap& resources) {
  return resources.empty() ? std::string("nothing") : sched::Describe(resources);
}

std::string ActorLabel(const ActorInfo& info) {
  std::string label = "actor " + std::to_string(info.id);
  if (!info.name.empty()) label += " '" + info.name + "'";
  return label + " (" + info.factory + ")";
}

}  // namespace

ActorDirectory::ActorDirectory(std::vector<NodeDescription> nodes, std::uint32_t head_rank,
                               Hooks hooks)
    : nodes_(std::move(nodes)),
      head_rank_(head_rank),
      hooks_(std::move(hooks)),
      held_(nodes_.size()),
      actor_count_(nodes_.size(), 0),
      lost_(nodes_.size(), false) {}

bool ActorDirectory::FitsTotal(std::uint32_t node, const sched::ResourceMap& request) const {
  return !lost_[node] && sched::Fits(request, nodes_[node].total);
}

bool ActorDirectory::FitsNode(std::uint32_t node, const sched::ResourceMap& request) const {
  if (lost_[node]) return false;
  sched::ResourceMap remaining = nodes_[node].total;
  sched::Subtract(remaining, held_[node]);
  return sched::Fits(request, remaining);
}

std::string ActorDirectory::Feasibility(const ActorCreation& creation) const {
  if (creation.placement_group != 0) {
    auto group = groups_.find(creation.placement_group);
    if (group == groups_.end() || group->second.removed) {
      return "its placement group " + std::to_string(creation.placement_group) +
             " does not exist (removed?)";
    }
    const auto& bundles = group->second.bundles;
    if (creation.bundle_index >= static_cast<std::int32_t>(bundles.size())) {
      return "bundle index " + std::to_string(creation.bundle_index) + " is past the group's " +
             std::to_string(bundles.size()) + " bundles";
    }
    for (std::size_t index = 0; index < bundles.size(); ++index) {
      if (creation.bundle_index >= 0 && static_cast<std::int32_t>(index) != creation.bundle_index)
        continue;
      if (sched::Fits(creation.resources, bundles[index].total)) return {};
    }
    return "it asks for " + Describe(creation.resources) +
           ", more than its placement-group bundle holds: make the bundle larger";
  }
  for (std::uint32_t node = 0; node < nodes_.size(); ++node) {
    if (FitsTotal(node, creation.resources)) return {};
  }
  std::string largest;
  for (const auto& node : nodes_) {
    largest += (largest.empty() ? "" : "; ") +
               ("node " + std::to_string(node.node_id) + ": " + Describe(node.total));
  }
  return "it asks for " + Describe(creation.resources) + " but no node of the job has that (" +
         largest + "): ask for less, or add resources= to the step's options";
}

Result<ActorInfo> ActorDirectory::Create(ActorCreation creation) {
  if (Status valid = ValidateResources(creation.resources, "actor " + creation.factory);
      !valid.ok()) {
    return valid;
  }
  if (creation.max_concurrency == 0) {
    return Status::InvalidArgument("sray: actor " + creation.factory +
                                   ": max_concurrency is 0: use 1 or more");
  }
  if (creation.max_restarts < 0 || creation.max_task_retries < 0) {
    return Status::InvalidArgument("sray: actor " + creation.factory +
                                   ": max_restarts and max_task_retries must be 0 or more");
  }
  Effects effects;
  ActorInfo info;
  {
    std::lock_guard lock(mutex_);
    if (!creation.name.empty() && names_.contains(creation.name)) {
      return Status::AlreadyExists("sray: an actor named '" + creation.name +
                                   "' already exists in this job: choose another name, or use "
                                   "sray::GetActor to reach it");
    }
    if (const std::string problem = Feasibility(creation); !problem.empty()) {
      return Status::ResourceExhausted("sray: actor " + creation.factory +
                                       " cannot be placed: " + problem);
    }
    if (!HasLiveBundle(creation)) {
      return Status::ResourceExhausted("sray: actor " + creation.factory +
                                       " cannot be placed: the bundles of its placement group it may use are "
                                       "all on lost nodes: make a new placement group");
    }
    ForgetOldDeadLocked();
    const std::uint64_t id = next_actor_++;
    ActorRecord& record = actors_[id];
    record.info.id = id;
    record.info.name = creation.name;
    record.info.factory = creation.factory;
    record.info.state = static_cast<std::uint8_t>(ActorState::kPending);
    record.info.max_task_retries = creation.max_task_retries;
    record.creation = std::move(creation);
    if (!record.info.name.empty()) names_[record.info.name] = id;
    if (!TryPlace(record, effects)) unplaced_.push_back(id);
    info = record.info;
  }
  Run(effects);
  return info;
}

Result<ActorInfo> ActorDirectory::Lookup(const std::string& name) {
  std::lock_guard lock(mutex_);
  auto found = names_.find(name);
  if (found == names_.end()) {
    return Status::NotFound("sray: no live actor is named '" + name + "'");
  }
  return actors_.at(found->second).info;
}

void ActorDirectory::WaitForChange(ActorWait wait, InfoCallback done) {
  Effects effects;
  bool known = false;
  std::string unknown;
  {
    std::lock_guard lock(mutex_);
    auto found = actors_.find(wait.id);
    if (found != actors_.end()) {
      known = true;
      found->second.waiters.push_back(Waiter{.seen = wait.seen, .done = std::move(done)});
      Notify(found->second, effects);
    } else {
      unknown = UnknownActorLocked(wait.id);
    }
  }
  if (!known) {
    done(Status::NotFound(unknown));
    return;
  }
  Run(effects);
}

void ActorDirectory::Notify(ActorRecord& record, Effects& effects) {
  const auto state = static_cast<ActorState>(record.info.state);
  auto& waiters = record.waiters;
  for (auto waiter = waiters.begin(); waiter != waiters.end();) {
    const bool changed = state == ActorState::kDead ||
                         (state == ActorState::kAlive && record.info.incarnation > waiter->seen);
    if (changed) {
      effects.infos.emplace_back(std::move(waiter->done), record.info);
      waiter = waiters.erase(waiter);
    } else {
      ++waiter;
    }
  }
}

bool ActorDirectory::TryPlace(ActorRecord& record, Effects& effects) {
  const auto& request = record.creation.resources;
  std::optional<std::uint32_t> chosen;
  if (record.creation.placement_group != 0) {
    auto group = groups_.find(record.creation.placement_group);
    if (group == groups_.end() || !group->second.placed) return false;
    auto& bundles = group->second.bundles;
    for (std::size_t index = 0; index < bundles.size(); ++index) {
      if (record.creation.bundle_index >= 0 &&
          static_cast<std::int32_t>(index) != record.creation.bundle_index) {
        continue;
      }
      if (lost_[bundles[index].node] || !sched::Fits(request, bundles[index].free)) continue;
      sched::Subtract(bundles[index].free, request);
      record.bundle = static_cast<std::int32_t>(index);
      chosen = bundles[index].node;
      break;
    }
  } else {
    for (std::uint32_t node = 0; node < nodes_.size(); ++node) {
      if (!FitsNode(node, request)) continue;
      if (!chosen || actor_count_[node] < actor_count_[*chosen]) chosen = node;
    }
    if (chosen) sched::Add(held_[*chosen], request);
  }
  if (!chosen) return false;
  record.placed = true;
  record.info.node = *chosen;
  actor_count_[*chosen]++;
  TaskSpec spec;
  spec.task_id = next_task_++;
  spec.return_id = internal::ObjectId{head_rank_, spec.task_id};
  spec.function = record.creation.factory;
  spec.name = record.info.name.empty() ? record.creation.factory : record.info.name;
  spec.arguments = record.creation.arguments;
  spec.resources = request;
  spec.owner_rank = head_rank_;
  spec.owner_node = 0;
  spec.placed = true;
  spec.kind = TaskKind::kActorCreation;
  spec.actor_id = record.info.id;
  spec.incarnation = record.info.incarnation;
  spec.max_concurrency = record.creation.max_concurrency;
  effects.submissions.emplace_back(*chosen, std::move(spec));
  return true;
}

void ActorDirectory::Release(ActorRecord& record) {
  if (!record.placed) return;
  const auto& request = record.creation.resources;
  if (record.bundle >= 0) {
    auto group = groups_.find(record.creation.placement_group);
    if (group != groups_.end() &&
        static_cast<std::size_t>(record.bundle) < group->second.bundles.size()) {
      sched::Add(group->second.bundles[static_cast<std::size_t>(record.bundle)].free, request);
    }
  } else {
    sched::Subtract(held_[record.info.node], request);
  }
  actor_count_[record.info.node]--;
  record.placed = false;
  record.bundle = -1;
}

void ActorDirectory::PlacePending(Effects& effects) {
  for (auto& [id, group] : groups_) {
    if (group.placed || group.removed || !TryPlaceGroup(group)) continue;
    for (auto& waiter : group.waiters)
      effects.groups.emplace_back(std::move(waiter), GroupInfo(id, group));
    group.waiters.clear();
  }
  for (auto id = unplaced_.begin(); id != unplaced_.end();) {
    auto found = actors_.find(*id);
    if (found == actors_.end() ||
        static_cast<ActorState>(found->second.info.state) == ActorState::kDead ||
        TryPlace(found->second, effects)) {
      id = unplaced_.erase(id);
    } else {
      ++id;
    }
  }
}

void ActorDirectory::MarkDead(ActorRecord& record, std::string cause, Effects& effects) {
  record.info.state = static_cast<std::uint8_t>(ActorState::kDead);
  effects.events.emplace_back("actor_died", ActorLabel(record.info) + " died: " + cause);
  record.info.cause = std::move(cause);
  // Never run again and never called again: its constructor's arguments and
  // its process's address go; its name, class, node and cause stay.
  std::vector<ArgumentSpec>().swap(record.creation.arguments);
  std::string().swap(record.info.worker_address);
  dead_.push_back(record.info.id);
  Release(record);
  auto named = names_.find(record.info.name);
  if (named != names_.end() && named->second == record.info.id) names_.erase(named);
  unplaced_.erase(std::remove(unplaced_.begin(), unplaced_.end(), record.info.id), unplaced_.end());
  Notify(record, effects);
}

std::string ActorDirectory::UnknownActorLocked(std::uint64_t id) const {
  if (id != 0 && id < next_actor_) {
    return "sray: actor " + std::to_string(id) +
           " died long ago: the head keeps the records of the newest " +
           std::to_string(kDeadActorsKept) + " dead actors only, so its cause is no longer known";
  }
  return "sray: actor " + std::to_string(id) + " is unknown to the head";
}

void ActorDirectory::ForgetOldDeadLocked() {
  while (dead_.size() > kDeadActorsKept) {
    auto found = actors_.find(dead_.front());
    dead_.pop_front();
    if (found == actors_.end()) continue;
    if (static_cast<ActorState>(found->second.info.state) != ActorState::kDead) continue;
    actors_.erase(found);
    ++forgotten_;
  }
}

Status ActorDirectory::Kill(const ActorKill& kill) {
  Effects effects;
  {
    std::lock_guard lock(mutex_);
    auto found = actors_.find(kill.id);
    if (found == actors_.end()) {
      // Killing an actor that died long ago (its record forgotten) is as
      // killing a dead one: nothing to do.
      if (kill.id != 0 && kill.id < next_actor_) return Status::Ok();
      return Status::NotFound(UnknownActorLocked(kill.id));
    }
    ActorRecord& record = found->second;
    const auto state = static_cast<ActorState>(record.info.state);
    if (state == ActorState::kDead) return Status::Ok();
    if (record.placed) {
      effects.stops.emplace_back(
          record.info.node,
          ActorKill{.id = kill.id, .no_restart = true, .incarnation = record.info.incarnation});
    }
    if (kill.no_restart) {
      MarkDead(record, "it was killed by ActorHandle::Kill()", effects);
      PlacePending(effects);
    }
    // Otherwise its node manager reports the death, and it restarts if allowed.
  }
  Run(effects);
  return Status::Ok();
}

void ActorDirectory::OnCreated(TaskOutcome outcome) {
  Effects effects;
  {
    std::lock_guard lock(mutex_);
    const auto kind = static_cast<OutcomeKind>(outcome.kind);
    auto found = actors_.find(outcome.actor_id);
    const bool current = found != actors_.end() &&
                         found->second.info.incarnation == outcome.incarnation &&
                         static_cast<ActorState>(found->second.info.state) != ActorState::kDead;
    if (!current) {
      // Killed (or replaced) while its constructor ran: end the process.
      if (HoldsValue(kind)) {
        effects.stops.emplace_back(outcome.node, ActorKill{.id = outcome.actor_id,
                                                           .no_restart = true,
                                                           .incarnation = outcome.incarnation});
      }
    } else {
      ActorRecord& record = found->second;
      ActorInfo& info = record.info;
      if (HoldsValue(kind)) {
        info.state = static_cast<std::uint8_t>(ActorState::kAlive);
        info.node = outcome.node;
        info.worker_rank = outcome.worker_rank;
        info.worker_address = std::move(outcome.worker_address);
        info.hostname = std::move(outcome.hostname);
        info.pid = outcome.pid;
        Notify(record, effects);
      } else if (kind == OutcomeKind::kWorkerDied) {
        Release(record);
        if (record.restarts < record.creation.max_restarts) {
          record.restarts++;
          info.incarnation++;
          info.state = static_cast<std::uint8_t>(ActorState::kRestarting);
          info.cause = "its constructor's process died: " + outcome.error_message;
          effects.events.emplace_back("actor_restarted", ActorLabel(info) + ": " + info.cause);
          if (!HasLiveBundle(record.creation)) {
            MarkDead(record, info.cause + "; its placement group's bundles are all on lost nodes", effects);
          } else if (!TryPlace(record, effects)) {
            unplaced_.push_back(info.id);
          }
        } else {
          MarkDead(record, "its constructor's process died: " + outcome.error_message, effects);
        }
      } else {
        std::string cause =
            "its constructor " + info.factory + " failed on node " + std::to_string(outcome.node);
        if (outcome.pid != 0) cause += " (pid " + std::to_string(outcome.pid) + ")";
        cause += ": " + (outcome.error_type.empty() ? std::string() : outcome.error_type + ": ") +
                 outcome.error_message;
        MarkDead(record, std::move(cause), effects);
        PlacePending(effects);
      }
    }
  }
  Run(effects);
}

void ActorDirectory::OnWorkerDied(const ActorDeath& death) {
  Effects effects;
  {
    std::lock_guard lock(mutex_);
    auto found = actors_.find(death.id);
    if (found == actors_.end()) return;
    ActorRecord& record = found->second;
    ActorInfo& info = record.info;
    if (info.incarnation != death.incarnation ||
        static_cast<ActorState>(info.state) == ActorState::kDead) {
      return;
    }
    Release(record);
    LoseIncarnation(record,
                    "its process (pid " + std::to_string(death.pid) + ") on node " +
                        std::to_string(death.node) + " " + death.cause,
                    effects);
    PlacePending(effects);
  }
  Run(effects);
}

void ActorDirectory::LoseIncarnation(ActorRecord& record, const std::string& where, Effects& effects) {
  ActorInfo& info = record.info;
  if (record.restarts < record.creation.max_restarts && HasLiveBundle(record.creation)) {
    record.restarts++;
    info.incarnation++;
    info.state = static_cast<std::uint8_t>(ActorState::kRestarting);
    info.cause = where + "; restarted (restart " + std::to_string(record.restarts) + " of " +
                 std::to_string(record.creation.max_restarts) + ")";
    effects.events.emplace_back("actor_restarted", ActorLabel(info) + ": " + info.cause);
    if (!TryPlace(record, effects)) unplaced_.push_back(info.id);
  } else if (record.restarts < record.creation.max_restarts) {
    MarkDead(record, where + "; its placement group's bundles are all on lost nodes", effects);
  } else {
    MarkDead(record,
             where + "; no restart left (max_restarts=" + std::to_string(record.creation.max_restarts) + ")",
             effects);
  }
}

bool ActorDirectory::HasLiveBundle(const ActorCreation& creation) const {
  if (creation.placement_group == 0) return true;
  auto group = groups_.find(creation.placement_group);
  if (group == groups_.end() || !group->second.placed) return true;  // decided when it is placed
  const auto& bundles = group->second.bundles;
  for (std::size_t index = 0; index < bundles.size(); ++index) {
    if (creation.bundle_index >= 0 && static_cast<std::int32_t>(index) != creation.bundle_index) continue;
    if (!lost_[bundles[index].node]) return true;
  }
  return false;
}

void ActorDirectory::OnNodeLost(std::uint32_t node, const std::string& cause) {
  Effects effects;
  {
    std::lock_guard lock(mutex_);
    if (node >= lost_.size() || lost_[node]) return;
    lost_[node] = true;
    effects.events.emplace_back("node_lost", "node " + std::to_string(node) + " (" + nodes_[node].hostname +
                                                 ") was lost: " + cause + "; the job goes on without it");
    for (auto& [id, record] : actors_) {
      if (!record.placed || record.info.node != node ||
          static_cast<ActorState>(record.info.state) == ActorState::kDead) {
        continue;
      }
      Release(record);
      LoseIncarnation(record, "its node " + std::to_string(node) + " was lost (" + cause + ")", effects);
    }
    // Actors waiting for a bundle that is gone for good.
    std::vector<std::uint64_t> stranded;
    for (const std::uint64_t id : unplaced_) {
      auto found = actors_.find(id);
      if (found != actors_.end() && !HasLiveBundle(found->second.creation)) stranded.push_back(id);
    }
    for (const std::uint64_t id : stranded) {
      MarkDead(actors_.at(id),
               "its placement group's bundles are all on lost nodes (node " + std::to_string(node) + ")", effects);
    }
    PlacePending(effects);
  }
  Run(effects);
}

// ---- placement groups ----

namespace {

// Bundle -> node for `bundles` given what each node has left, or nothing.
std::optional<std::vector<std::uint32_t>> Layout(const std::vector<ResourceMap>& bundles,
                                                 PlacementStrategy strategy,
                                                 std::vector<ResourceMap> remaining) {
  const auto nodes = static_cast<std::uint32_t>(remaining.size());
  std::vector<std::uint32_t> layout;
  std::vector<std::uint32_t> used(nodes, 0);
  auto cpus = [&](std::uint32_t node) {
    auto found = remaining[node].find("CPU");
    return found == remaining[node].end() ? 0.0 : found->second;
  };
  const bool pack =
      strategy == PlacementStrategy::kPack || strategy == PlacementStrategy::kStrictPack;
  const bool strict =
      strategy == PlacementStrategy::kStrictPack || strategy == PlacementStrategy::kStrictSpread;
  if (pack) {
    ResourceMap sum;
    for (const auto& bundle : bundles) sched::Add(sum, bundle);
    std::optional<std::uint32_t> best;
    for (std::uint32_t node = 0; node < nodes; ++node) {
      if (sched::Fits(sum, remaining[node]) && (!best || cpus(node) > cpus(*best))) best = node;
    }
    if (best) return std::vector<std::uint32_t>(bundles.size(), *best);
    if (strict) return std::nullopt;
  }
  for (const auto& bundle : bundles) {
    std::optional<std::uint32_t> best;
    for (std::uint32_t node = 0; node < nodes; ++node) {
      if (!sched::Fits(bundle, remaining[node])) continue;
      if (!pack && strict && used[node] > 0) continue;
      // Pack: the node already used most; spread: least; then the most CPUs.
      const bool better = !best || (pack ? used[node] > used[*best] : used[node] < used[*best]) ||
                          (used[node] == used[*best] && cpus(node) > cpus(*best));
      if (better) best = node;
    }
    if (!best) return std::nullopt;
    sched::Subtract(remaining[*best], bundle);
    used[*best]++;
    layout.push_back(*best);
  }
  return layout;
}

}  // namespace

bool ActorDirectory::TryPlaceGroup(Group& group) {
  std::vector<ResourceMap> remaining;
  for (std::uint32_t node = 0; node < nodes_.size(); ++node) {
    remaining.push_back(lost_[node] ? ResourceMap{} : nodes_[node].total);
    if (!lost_[node]) sched::Subtract(remaining.back(), held_[node]);
  }
  auto layout = Layout(group.creation.bundles, group.creation.strategy, std::move(remaining));
  if (!layout) return false;
  for (std::size_t index = 0; index < group.bundles.size(); ++index) {
    group.bundles[index].node = (*layout)[index];
    group.bundles[index].free = group.bundles[index].total;
    sched::Add(held_[(*layout)[index]], group.bundles[index].total);
  }
  group.placed = true;
  return true;
}

PlacementGroupInfo ActorDirectory::GroupInfo(std::uint64_t id, const Group& group) const {
  PlacementGroupInfo info;
  info.id = id;
  info.placed = group.placed;
  info.removed = group.removed;
  if (group.placed) {
    for (const auto& bundle : group.bundles) info.bundle_nodes.push_back(bundle.node);
  }
  return info;
}

Result<PlacementGroupInfo> ActorDirectory::CreatePlacementGroup(
    const PlacementGroupCreation& creation) {
  if (creation.bundles.empty()) {
    return Status::InvalidArgument("sray: a placement group needs at least one bundle");
  }
  // Decoding takes any number for the enum: a peer's garbage stops here.
  if (static_cast<std::uint8_t>(creation.strategy) >
      static_cast<std::uint8_t>(PlacementStrategy::kStrictSpread)) {
    return Status::InvalidArgument("sray: unknown placement strategy " +
                                   std::to_string(static_cast<unsigned>(creation.strategy)));
  }
  for (const auto& bundle : creation.bundles) {
    if (Status valid = ValidateResources(bundle, "placement group bundle"); !valid.ok())
      return valid;
    if (bundle.empty()) {
      return Status::InvalidArgument(
          "sray: a placement group bundle is empty: give each bundle "
          "resources, e.g. {{\"CPU\", 1}}");
    }
  }
  std::vector<ResourceMap> totals;
  for (const auto& node : nodes_) totals.push_back(node.total);
  if (!Layout(creation.bundles, creation.strategy, totals)) {
    std::string bundles;
    for (const auto& bundle : creation.bundles)
      bundles += (bundles.empty() ? "" : " | ") + Describe(bundle);
    return Status::ResourceExhausted(
        "sray: placement group cannot be placed: its bundles (" + bundles +
        ") do not fit the job's " + std::to_string(nodes_.size()) +
        " nodes with this strategy even when they are idle: use fewer or smaller bundles, a "
        "non-strict strategy, or more nodes");
  }
  Effects effects;
  PlacementGroupInfo info;
  {
    std::lock_guard lock(mutex_);
    const std::uint64_t id = next_group_++;
    Group& group = groups_[id];
    group.creation = creation;
    for (const auto& bundle : creation.bundles) {
      group.bundles.push_back(Bundle{.total = bundle, .free = bundle, .node = 0});
    }
    TryPlaceGroup(group);
    info = GroupInfo(id, group);
  }
  return info;
}

void ActorDirectory::WaitPlacementGroup(const PlacementGroupWait& wait, GroupCallback done) {
  PlacementGroupInfo info;
  {
    std::lock_guard lock(mutex_);
    auto found = groups_.find(wait.id);
    if (found == groups_.end()) {
      info.id = wait.id;
      info.removed = true;
    } else if (found->second.placed || found->second.removed || !wait.block) {
      info = GroupInfo(wait.id, found->second);
    } else {
      found->second.waiters.push_back(std::move(done));
      return;
    }
  }
  done(std::move(info));
}

Status ActorDirectory::RemovePlacementGroup(std::uint64_t id) {
  Effects effects;
  {
    std::lock_guard lock(mutex_);
    auto found = groups_.find(id);
    if (found == groups_.end() || found->second.removed) return Status::Ok();
    for (auto& [actor_id, record] : actors_) {
      if (record.creation.placement_group != id ||
          static_cast<ActorState>(record.info.state) == ActorState::kDead) {
        continue;
      }
      if (record.placed) {
        effects.stops.emplace_back(
            record.info.node,
            ActorKill{.id = actor_id, .no_restart = true, .incarnation = record.info.incarnation});
      }
      MarkDead(record, "its placement group was removed", effects);
    }
    Group& group = found->second;
    if (group.placed) {
      for (const auto& bundle : group.bundles) sched::Subtract(held_[bundle.node], bundle.total);
    }
    group.placed = false;
    group.removed = true;
    effects.events.emplace_back(
        "placement_group_removed",
        "placement group " + std::to_string(id) +
            (group.creation.name.empty() ? "" : " '" + group.creation.name + "'") + " removed");
    for (auto& waiter : group.waiters)
      effects.groups.emplace_back(std::move(waiter), GroupInfo(id, group));
    group.waiters.clear();
    PlacePending(effects);
  }
  Run(effects);
  return Status::Ok();
}

void ActorDirectory::DropWaiters() {
  std::vector<Waiter> actor_waiters;
  std::vector<GroupCallback> group_waiters;
  {
    std::lock_guard lock(mutex_);
    for (auto& [id, record] : actors_) {
      for (auto& waiter : record.waiters) actor_waiters.push_back(std::move(waiter));
      record.waiters.clear();
    }
    for (auto& [id, group] : groups_) {
      for (auto& waiter : group.waiters) group_waiters.push_back(std::move(waiter));
      group.waiters.clear();
    }
  }
  // Destroyed here, without the lock: a deferred reply answers as it goes.
}

void ActorDirectory::Run(Effects& effects) {
  for (auto& [node, spec] : effects.submissions) hooks_.submit_to_node(node, std::move(spec));
  for (auto& [node, kill] : effects.stops) hooks_.stop_worker(node, kill);
  for (auto& [done, info] : effects.infos) done(std::move(info));
  for (auto& [done, info] : effects.groups) done(std::move(info));
  for (auto& [kind, message] : effects.events) events_.Add(std::move(kind), std::move(message));
}

std::vector<ActorDirectory::ActorView> ActorDirectory::Actors(std::size_t limit,
                                                              std::size_t& total) {
  std::lock_guard lock(mutex_);
  total = actors_.size() + forgotten_;
  std::vector<ActorView> views;
  views.reserve(std::min(limit, actors_.size()));
  for (auto record = actors_.rbegin(); record != actors_.rend() && views.size() < limit; ++record) {
    views.push_back(ActorView{.info = record->second.info,
                              .restarts = record->second.restarts,
                              .max_restarts = record->second.creation.max_restarts,
                              .resources = record->second.creation.resources,
                              .placement_group = record->second.creation.placement_group});
  }
  std::reverse(views.begin(), views.end());
  return views;
}

std::vector<ActorDirectory::PlacementGroupView> ActorDirectory::PlacementGroups(
    std::size_t limit, std::size_t& total) {
  std::lock_guard lock(mutex_);
  total = groups_.size();
  std::vector<PlacementGroupView> views;
  for (auto group = groups_.rbegin(); group != groups_.rend() && views.size() < limit; ++group) {
    views.push_back(PlacementGroupView{.info = GroupInfo(group->first, group->second),
                                       .name = group->second.creation.name,
                                       .strategy = group->second.creation.strategy,
                                       .bundles = group->second.creation.bundles});
  }
  std::reverse(views.begin(), views.end());
  return views;
}

// ---- serving other processes ----

void ActorDirectory::RegisterHandlers(transport::Transport& transport) {
  auto reply = [](const auto& result) -> Result<transport::Bytes> {
    if (!result.ok()) return result.status();
    return Encode(*result);
  };
  transport.RegisterRequestHandler(
      kCreateActor, [this, reply](std::uint32_t, auto payload) -> Result<transport::Bytes> {
        auto creation = Decode<ActorCreation>(payload, "actor creation");
        if (!creation.ok()) return creation.status();
        return reply(Create(std::move(creation).value()));
      });
  transport.RegisterRequestHandler(
      kLookupActor, [this, reply](std::uint32_t, auto payload) -> Result<transport::Bytes> {
        auto lookup = Decode<ActorLookup>(payload, "actor lookup");
        if (!lookup.ok()) return lookup.status();
        return reply(Lookup(lookup->name));
      });
  transport.RegisterOneWayHandler(kWaitActorChange, [this](std::uint32_t, auto payload) {
    auto wait = Decode<ActorWait>(payload, "actor wait");
    if (!wait.ok()) return;
    const ActorWait request = *wait;
    WaitForChange(request, [this, request](Result<ActorInfo> info) {
      ActorChanged changed;
      changed.caller_rank = request.caller_rank;
      changed.id = request.id;
      changed.found = info.ok();
      if (info.ok()) {
        changed.info = std::move(info).value();
      } else {
        changed.error = info.status().message();
      }
      hooks_.notify(request.caller_node, std::move(changed));
    });
  });
  transport.RegisterRequestHandler(kKillActor,
                                   [this](std::uint32_t, auto payload) -> Result<transport::Bytes> {
                                     auto kill = Decode<ActorKill>(payload, "actor kill");
                                     if (!kill.ok()) return kill.status();
                                     if (Status status = Kill(*kill); !status.ok()) return status;
                                     return transport::Bytes{};
                                   });
  transport.RegisterOneWayHandler(kActorCreated, [this](std::uint32_t, auto payload) {
    auto outcome = Decode<TaskOutcome>(payload, "actor creation outcome");
    if (outcome.ok()) OnCreated(std::move(outcome).value());
  });
  transport.RegisterOneWayHandler(kActorWorkerDied, [this](std::uint32_t, auto payload) {
    auto death = Decode<ActorDeath>(payload, "actor death");
    if (death.ok()) OnWorkerDied(*death);
  });
  transport.RegisterRequestHandler(
      kCreatePlacementGroup,
      [this, reply](std::uint32_t, auto payload) -> Result<transport::Bytes> {
        auto creation = Decode<PlacementGroupCreation>(payload, "placement group creation");
        if (!creation.ok()) return creation.status();
        return reply(CreatePlacementGroup(*creation));
      });
  transport.RegisterRequestHandler(
      kWaitPlacementGroup, [this](std::uint32_t, auto payload) -> Result<transport::Bytes> {
        auto wait = Decode<PlacementGroupWait>(payload, "placement group wait");
        if (!wait.ok()) return wait.status();
        PlacementGroupInfo state;
        WaitPlacementGroup(PlacementGroupWait{.id = wait->id, .block = false},
                           [&state](PlacementGroupInfo info) { state = std::move(info); });
        return Encode(state);
      });
  transport.RegisterRequestHandler(
      kRemovePlacementGroup, [this](std::uint32_t, auto payload) -> Result<transport::Bytes> {
        auto removal = Decode<PlacementGroupRemoval>(payload, "placement group removal");
        if (!removal.ok()) return removal.status();
        if (Status status = RemovePlacementGroup(removal->id); !status.ok()) return status;
        return transport::Bytes{};
      });
}

}  // namespace sray::core
