#include "core/local_scheduler.h"

#include <algorithm>
#include <optional>
#include <utility>

namespace sray::core {
namespace {

// Workers that die before they register, before any ever did, after which
// the queue fails: the program is not a sray program.
constexpr std::uint32_t kDeathsBeforeStartLimit = 3;

bool IsKind(const TaskSpec& task, TaskKind kind) {
  return task.kind == kind;
}

double Amount(const sched::ResourceMap& resources, const std::string& name, double otherwise) {
  const auto found = resources.find(name);
  return found == resources.end() ? otherwise : found->second;
}

// How many tasks of `shape` fit into `available` at once.
std::size_t TimesItFits(const sched::ResourceMap& shape, const sched::ResourceMap& available,
                        std::size_t at_most) {
  std::size_t times = at_most;
  for (const auto& [name, amount] : shape) {
    if (amount <= 0) continue;
    const double have = Amount(available, name, 0.0);
    times = std::min(times, static_cast<std::size_t>(std::max(0.0, (have + 1e-9) / amount)));
  }
  return times;
}

}  // namespace

LocalScheduler::LocalScheduler(LocalSchedulerConfig config)
    : config_(std::move(config)), available_(config_.total), gpus_(config_.gpu_devices) {}

SchedulerEffects LocalScheduler::ApplyClusterView(std::vector<NodeDescription> nodes) {
  nodes_ = std::move(nodes);
  node_available_.clear();
  for (const auto& node : nodes_) node_available_.push_back(node.total);
  node_queued_.assign(nodes_.size(), 0);
  lost_.assign(nodes_.size(), false);
  SchedulerEffects effects;
  Dispatch(effects);
  return effects;
}

SchedulerEffects LocalScheduler::OnResourceUpdate(const ResourceUpdate& update) {
  SchedulerEffects effects;
  if (update.node_id >= node_available_.size() || IsLost(update.node_id)) return effects;
  node_available_[update.node_id] = update.available;
  node_queued_[update.node_id] = update.queued;
  Dispatch(effects);
  return effects;
}

void LocalScheduler::StartOneWorker(SchedulerEffects& effects) {
  // Ranks wrap after 65,536 spawns; one still in use (a long-lived actor's)
  // is skipped: two live processes of one rank would share their objects'
  // ids, and the end of one would free the other's (kOwnerGone). So is one
  // that ended lately: owners keep no registration for a rank among the
  // last ends they heard of (Owner::ForgetBorrower), every end on this node
  // among them, and would take the new process for the ended one.
  std::uint32_t rank = 0;
  for (std::uint32_t tried = 0; tried < kWorkersPerNodeLimit; ++tried) {
    rank = kFirstWorkerRank + config_.node_id * kWorkersPerNodeLimit +
           (next_worker_++ % kWorkersPerNodeLimit);
    if (!workers_.contains(rank) && !recently_ended_.Contains(rank)) break;
  }
  workers_[rank] = Worker{};
  ++starting_;
  effects.emplace_back(effects::StartWorker{rank});
}

SchedulerEffects LocalScheduler::Submit(TaskSpec spec) {
  SchedulerEffects effects;
  Schedule(std::move(spec), effects);
  return effects;
}

std::string LocalScheduler::InfeasibleMessage(const TaskSpec& spec) const {
  std::string largest;
  double most_cpus = -1;
  std::uint32_t largest_node = 0;
  for (const auto& node : nodes_) {
    if (IsLost(node.node_id)) continue;
    const double cpus = Amount(node.total, "CPU", 0.0);
    if (cpus > most_cpus) {
      most_cpus = cpus;
      largest = sched::Describe(node.total);
      largest_node = node.node_id;
    }
  }
  return "asks " + sched::Describe(spec.resources) +
         " but no node of this job can ever provide that (the largest, node " +
         std::to_string(largest_node) + ", has " + largest +
         "): lower the request, or give the nodes more (srun --cpus-per-task, sray run "
         "--cpus-per-node, or --ray-cluster=resources=NAME:AMOUNT for custom resources and GPUs)";
}

TaskOutcome LocalScheduler::OutcomeFor(const TaskSpec& spec, OutcomeKind kind,
                                       std::string message) const {
  TaskOutcome outcome = FailedOutcome(spec, kind, std::move(message));
  outcome.node = config_.node_id;
  return outcome;
}

void LocalScheduler::Schedule(TaskSpec spec, SchedulerEffects& effects) {
  if (!sched::Fits(spec.resources, config_.total)) {
    const bool anywhere = std::any_of(nodes_.begin(), nodes_.end(), [&](const auto& node) {
      return !IsLost(node.node_id) && sched::Fits(spec.resources, node.total);
    });
    if (!anywhere) {
      effects.emplace_back(effects::DeliverOutcome{
          OutcomeFor(spec, OutcomeKind::kInfeasible, InfeasibleMessage(spec))});
      return;
    }
    if (!Forward(spec, ForwardTo::kFreeOrShortQueue, effects)) {
      Forward(spec, ForwardTo::kAnyFeasible, effects);
    }
    return;
  }
  queues_[spec.resources].push_back(std::move(spec));
  ++queued_;
  Dispatch(effects);
}

bool LocalScheduler::Forward(TaskSpec& spec, ForwardTo where, SchedulerEffects& effects) {
  // Prefer a node with the resources free now, then the shortest queue.
  std::optional<std::uint32_t> best;
  bool best_free = false;
  std::uint32_t best_queued = 0;
  for (std::uint32_t node = 0; node < nodes_.size(); ++node) {
    if (node == config_.node_id || IsLost(node) || !sched::Fits(spec.resources, nodes_[node].total)) continue;
    const bool free = sched::Fits(spec.resources, node_available_[node]);
    const double cpus = Amount(nodes_[node].total, "CPU", 1.0);
    const auto queue_limit = static_cast<std::uint32_t>(kQueuedPerRemoteCpu * std::max(1.0, cpus));
    // kFree also wants nothing queued there: tasks waiting for a worker to
    // start do not show in a node's free resources, and without this a
    // burst would keep filling the same "free" CPUs until workers started.
    const bool acceptable =
        where == ForwardTo::kAnyFeasible ||
        (where == ForwardTo::kFree ? free && node_queued_[node] == 0 : free) ||
        (where == ForwardTo::kFreeOrShortQueue && node_queued_[node] < queue_limit);
    if (!acceptable) continue;
    if (!best || (free && !best_free) || (free == best_free && node_queued_[node] < best_queued)) {
      best = node;
      best_free = free;
      best_queued = node_queued_[node];
    }
  }
  if (!best) return false;
  // Assume it is taken until the node's next update says otherwise.
  if (best_free) {
    sched::Subtract(node_available_[*best], spec.resources);
  } else {
    node_queued_[*best]++;
  }
  spec.hops++;
  if (spec.owner_node == config_.node_id) {
    forwarded_[ForwardKey{spec.owner_rank, spec.task_id}] =
        ForwardedTask{*best, spec.return_id, spec.attempt, spec.hops};
  } else {
    effects.emplace_back(
        effects::TellTaskMoved{spec.owner_node, TaskMoved{.owner_rank = spec.owner_rank,
                                                          .task_id = spec.task_id,
                                                          .attempt = spec.attempt,
                                                          .node = nodes_[*best].node_id,
                                                          .hops = spec.hops}});
  }
  effects.emplace_back(effects::ForwardToNode{nodes_[*best].rank, std::move(spec)});
  return true;
}

void LocalScheduler::OnOutcomeRouted(const TaskOutcome& outcome) {
  if (forwarded_.empty()) return;
  auto found = forwarded_.find(ForwardKey{outcome.owner_rank, outcome.task_id});
  if (found == forwarded_.end()) return;
  // An earlier try's outcome (from a node it moved on to, after the node it
  // was sent to was lost): the entry follows the retry.
  if (outcome.attempt < found->second.attempt) return;
  // A late outcome from a lost node, of a try already given up on there:
  // the entry now follows the retry elsewhere.
  if (IsLost(outcome.node) && found->second.node != outcome.node) return;
  forwarded_.erase(found);
}

TaskOutcome LocalScheduler::LostWithItsNode(const ForwardKey& key, const ForwardedTask& task,
                                            const std::string& cause) const {
  TaskOutcome outcome;
  outcome.task_id = key.task_id;
  outcome.owner_rank = key.owner_rank;
  outcome.owner_node = config_.node_id;
  outcome.return_id = task.return_id;
  outcome.attempt = task.attempt;
  outcome.kind = static_cast<std::uint8_t>(OutcomeKind::kWorkerDied);
  outcome.node = task.node;
  outcome.error_message =
      "node " + std::to_string(task.node) + ", where it ran, was lost (" + cause + ")";
  return outcome;
}

SchedulerEffects LocalScheduler::OnNodeLost(std::uint32_t node, const std::string& cause) {
  SchedulerEffects effects;
  if (node >= lost_.size() || lost_[node] || node == config_.node_id) return effects;
  lost_[node] = true;
  lost_causes_[node] = cause;
  node_available_[node].clear();
  for (auto entry = forwarded_.begin(); entry != forwarded_.end();) {
    if (entry->second.node != node) {
      ++entry;
      continue;
    }
    effects.emplace_back(
        effects::DeliverOutcome{LostWithItsNode(entry->first, entry->second, cause)});
    entry = forwarded_.erase(entry);
  }
  Dispatch(effects);
  return effects;
}

SchedulerEffects LocalScheduler::OnTaskMoved(const TaskMoved& moved) {
  SchedulerEffects effects;
  // None: its outcome came back first (it travels another way), or it is
  // not this node's to track.
  auto found = forwarded_.find(ForwardKey{moved.owner_rank, moved.task_id});
  if (found == forwarded_.end() || found->second.attempt != moved.attempt) return effects;
  // An earlier move, overtaken by a later one (or by this node's own).
  if (moved.hops <= found->second.hops) return effects;
  found->second.node = moved.node;
  found->second.hops = moved.hops;
  if (IsLost(moved.node)) {
    effects.emplace_back(effects::DeliverOutcome{
        LostWithItsNode(found->first, found->second, lost_causes_[moved.node])});
    forwarded_.erase(found);
  }
  return effects;
}

void LocalScheduler::Assign(std::uint32_t rank, Worker& worker, TaskSpec task,
                            SchedulerEffects& effects) {
  // If the worker is dying, its exit hands the assigned tasks back.
  if (IsKind(task, TaskKind::kActorCreation)) ++constructing_;
  worker.assigned.push_back(task);
  effects.emplace_back(effects::RunOnWorker{rank, std::move(task)});
}

void LocalScheduler::Dispatch(SchedulerEffects& effects) {
  if (nodes_.empty()) return;
  std::size_t waiting_for_worker = 0;
  std::size_t waiting_actors = 0;
  for (auto shape = queues_.begin(); shape != queues_.end();) {
    auto& tasks = shape->second;
    // 1. Idle workers here, with fresh grants of resources.
    while (!tasks.empty() && !idle_.empty() && sched::Fits(shape->first, available_)) {
      const double gpus = Amount(shape->first, "GPU", 0.0);
      auto devices = gpus_.Acquire(gpus);
      if (!devices) break;
      const std::uint32_t rank = idle_.back();
      idle_.pop_back();
      sched::Subtract(available_, shape->first);
      dirty_ = true;
      Worker& worker = workers_[rank];
      worker.devices = *devices;
      worker.granted = shape->first;
      TaskSpec task = std::move(tasks.front());
      tasks.pop_front();
      --queued_;
      task.visible_devices = gpus > 0 ? sched::DeviceList(*devices) : std::string();
      Assign(rank, worker, std::move(task), effects);
    }
    if (!tasks.empty() && sched::Fits(shape->first, available_)) {
      const std::size_t fitting = TimesItFits(shape->first, available_, tasks.size());
      waiting_for_worker += fitting;
      for (std::size_t index = 0; index < fitting; ++index) {
        if (IsKind(tasks[index], TaskKind::kActorCreation)) ++waiting_actors;
      }
      // Those right behind, beyond what fits here now, to nodes with room
      // now (stopping at the first that stays: a scan must not walk a long
      // queue on every event).
      while (fitting < tasks.size() && tasks[fitting].hops == 0 && !tasks[fitting].placed &&
             Forward(tasks[fitting], ForwardTo::kFree, effects)) {
        tasks.erase(tasks.begin() + static_cast<std::ptrdiff_t>(fitting));
        --queued_;
      }
    }
    // 2. Other nodes with room or a short queue, for tasks submitted here;
    // a task forwarded here moves on only to a node with room now
    // (spillback), up to kMostHops moves in all. Placed ones never move.
    while (!tasks.empty() && tasks.front().hops < kMostHops && !tasks.front().placed &&
           !sched::Fits(shape->first, available_) &&
           Forward(tasks.front(),
                   tasks.front().hops == 0 ? ForwardTo::kFreeOrShortQueue : ForwardTo::kFree,
                   effects)) {
      tasks.pop_front();
      --queued_;
    }
    // 3. Behind a task of the same shape on a busy worker here, only when
    // the node has no room of its own for them (with room, a worker is
    // starting for them, and a short task must not wait behind a long one)
    // and a run of them waits: pipelining hides the round trip between
    // tasks, which a run pays many times over, while a lone task gains one
    // round trip and risks waiting out a long task, unmovable, when room
    // shows up elsewhere a moment later. Queued, it takes this node's next
    // free worker, or moves on with the next update that shows room
    // elsewhere (step 2).
    const bool run_of_tasks = tasks.size() > 1;
    for (auto& [rank, worker] : workers_) {
      if (!run_of_tasks || tasks.empty() || sched::Fits(shape->first, available_)) break;
      if (worker.assigned.empty() || worker.granted != shape->first || worker.lent_cpus > 0) {
        continue;
      }
      // A constructor needs a worker of its own, and so does the actor.
      if (!IsKind(worker.assigned.front(), TaskKind::kFunction)) continue;
      while (!tasks.empty() && worker.assigned.size() <= kTasksPipelinedPerWorker &&
             IsKind(tasks.front(), TaskKind::kFunction)) {
        TaskSpec task = std::move(tasks.front());
        tasks.pop_front();
        --queued_;
        task.visible_devices = worker.assigned.front().visible_devices;
        Assign(rank, worker, std::move(task), effects);
      }
    }
    shape = tasks.empty() ? queues_.erase(shape) : std::next(shape);
  }
  // Actors' workers, constructing ones too, do not count against the pool's
  // cap: each actor needs a process of its own. A worker retiring a killed
  // actor is idle within a millisecond or so, far sooner than a new one
  // would start: it counts as one starting. Starting workers are in
  // workers_ too: counted once, as starting.
  const std::size_t not_task_workers = actor_workers_ + constructing_ + starting_;
  auto task_workers =
      workers_.size() > not_task_workers ? workers_.size() - not_task_workers : std::size_t{0};
  // Workers whose task waits in Get lent their CPUs and do not count against
  // the cap: once every worker of the pool waited, the tasks those waits
  // need (a lineage rebuild, a child) found no worker to run them, and the
  // job hung (Ray starts workers for them too). Counted only at the cap.
  if (waiting_for_worker > starting_ + retiring_ &&
      task_workers + starting_ >= config_.max_workers + waiting_actors) {
    task_workers -= std::min(task_workers, TaskWorkersWaitingInGet());
  }
  // Starts stop after kDeathsBeforeStartLimit deaths before registering only
  // while no worker ever registered (a program that cannot start them, whose
  // queue fails): once one has, such deaths are workers killed while
  // starting, and stopping would leave the queue waiting forever.
  while (waiting_for_worker > starting_ + retiring_ &&
         task_workers + starting_ < config_.max_workers + waiting_actors &&
         (ever_registered_ || deaths_before_start_ < kDeathsBeforeStartLimit)) {
    StartOneWorker(effects);
  }
}

SchedulerEffects LocalScheduler::OnWorkerSpawned(std::uint32_t rank, pid_t pid) {
  auto found = workers_.find(rank);
  if (found != workers_.end()) {
    found->second.pid = pid;
    worker_by_pid_[pid] = rank;
  }
  return {};
}

SchedulerEffects LocalScheduler::OnWorkerSpawnFailed(std::uint32_t rank, const std::string& why) {
  SchedulerEffects effects;
  if (workers_.erase(rank) == 0) return effects;
  if (starting_ > 0) --starting_;
  FailQueued(OutcomeKind::kSystemError,
             "cannot start a worker on node " + std::to_string(config_.node_id) + ": " + why,
             effects);
  return effects;
}

SchedulerEffects LocalScheduler::OnWorkerRegistered(std::uint32_t rank) {
  SchedulerEffects effects;
  auto found = workers_.find(rank);
  if (found == workers_.end() || found->second.registered) return effects;
  found->second.registered = true;
  ever_registered_ = true;
  deaths_before_start_ = 0;
  if (starting_ > 0) --starting_;
  MarkIdle(rank, found->second);
  Dispatch(effects);
  return effects;
}

SchedulerEffects LocalScheduler::OnTaskDone(std::uint32_t worker_rank, TaskOutcome outcome) {
  SchedulerEffects effects;
  auto found = workers_.find(worker_rank);
  if (found == workers_.end() || found->second.assigned.empty()) return effects;
  Worker& worker = found->second;
  // Usually the front one; a worker waiting in Get runs later ones first.
  auto done =
      std::find_if(worker.assigned.begin(), worker.assigned.end(), [&](const TaskSpec& task) {
        return task.task_id == outcome.task_id && task.return_id == outcome.return_id;
      });
  if (done == worker.assigned.end()) return effects;
  const bool constructor = IsKind(*done, TaskKind::kActorCreation);
  if (constructor) --constructing_;
  worker.assigned.erase(done);
  if (constructor) {
    const auto kind = static_cast<OutcomeKind>(outcome.kind);
    if (HoldsValue(kind)) {
      // The worker is the actor's now, with the grant, until its process ends.
      worker.actor_id = outcome.actor_id;
      worker.incarnation = outcome.incarnation;
      ++actor_workers_;
      outcome.worker_rank = worker_rank;
      effects.emplace_back(effects::ActorReady{std::move(outcome)});
    } else {
      ReleaseGrant(worker);
      MarkIdle(worker_rank, worker);
      effects.emplace_back(effects::DeliverOutcome{std::move(outcome)});
    }
    Dispatch(effects);
    return effects;
  }
  if (worker.assigned.empty()) {
    ReleaseGrant(worker);
    MarkIdle(worker_rank, worker);
  }
  effects.emplace_back(effects::DeliverOutcome{std::move(outcome)});
  Dispatch(effects);
  return effects;
}

SchedulerEffects LocalScheduler::OnWorkerBlocked(std::uint32_t worker_rank, bool blocked) {
  SchedulerEffects effects;
  auto found = workers_.find(worker_rank);
  if (found == workers_.end()) return effects;
  Worker& worker = found->second;
  if (blocked) {
    // Ray's rule: a task waiting for others lends its CPUs (not its GPUs).
    const auto cpus = worker.granted.find("CPU");
    if (worker.assigned.empty() || cpus == worker.granted.end() || worker.lent_cpus > 0) {
      return effects;
    }
    worker.lent_cpus = cpus->second;
    available_["CPU"] += worker.lent_cpus;
  } else {
    if (worker.lent_cpus <= 0) return effects;
    // Taken back at once, even if others use them now: the node runs over
    // its CPUs until they finish.
    available_["CPU"] -= worker.lent_cpus;
    worker.lent_cpus = 0;
  }
  dirty_ = true;
  Dispatch(effects);
  return effects;
}

void LocalScheduler::ReleaseGrant(Worker& worker) {
  sched::Add(available_, worker.granted);
  available_["CPU"] -= worker.lent_cpus;  // already given back while it waited
  worker.lent_cpus = 0;
  gpus_.Release(worker.devices, Amount(worker.granted, "GPU", 0.0));
  worker.devices.clear();
  worker.granted.clear();
  dirty_ = true;
}

SchedulerEffects LocalScheduler::OnWorkerExited(pid_t pid, const std::string& how) {
  SchedulerEffects effects;
  auto by_pid = worker_by_pid_.find(pid);
  if (by_pid == worker_by_pid_.end()) return effects;
  const std::uint32_t rank = by_pid->second;
  worker_by_pid_.erase(by_pid);
  recently_ended_.Add(rank);
  effects.emplace_back(effects::ForgetWorker{rank});
  auto found = workers_.find(rank);
  if (found == workers_.end()) return effects;
  Worker worker = std::move(found->second);
  workers_.erase(found);
  if (worker.ending) --ending_;
  idle_.erase(std::remove(idle_.begin(), idle_.end(), rank), idle_.end());
  if (worker.actor_id != 0) {
    --actor_workers_;
    if (worker.retiring) --retiring_;
    ReleaseGrant(worker);
    effects.emplace_back(effects::ActorProcessDied{ActorDeath{.id = worker.actor_id,
                                                              .incarnation = worker.incarnation,
                                                              .node = config_.node_id,
                                                              .pid = pid,
                                                              .cause = worker.retiring
                                                                           ? "was ended by Kill (its process ended with " + how + ")"
                                                                           : "ended with " + how}});
    Dispatch(effects);
    return effects;
  }
  if (!worker.registered) {
    if (starting_ > 0) --starting_;
    ++deaths_before_start_;
    if (deaths_before_start_ >= kDeathsBeforeStartLimit && !ever_registered_) {
      FailQueued(OutcomeKind::kSystemError,
                 "workers of node " + std::to_string(config_.node_id) +
                     " end before they start (last: " + how +
                     "): the program must call "
                     "sray::Init(argc, argv) at the top of main, before anything that can fail "
                     "or exit; see the job's output for the workers' own messages",
                 effects);
      return effects;
    }
  }
  if (!worker.assigned.empty()) {
    ReleaseGrant(worker);
    const TaskSpec& spec = worker.assigned.front();
    if (IsKind(spec, TaskKind::kActorCreation)) {
      --constructing_;
    } else {
      effects.emplace_back(effects::DiscardResult{spec.return_id});
    }
    TaskOutcome outcome =
        OutcomeFor(spec, OutcomeKind::kWorkerDied,
                   "its worker (pid " + std::to_string(pid) + ") on node " +
                       std::to_string(config_.node_id) + " died with " + how + " while running it");
    outcome.pid = pid;
    effects.emplace_back(effects::DeliverOutcome{std::move(outcome)});
    // Tasks waiting behind it go back to the queue. A worker blocked in Get
    // runs later ones first, so they too may have left a result behind.
    for (std::size_t index = worker.assigned.size(); index-- > 1;) {
      auto& waiting = worker.assigned[index];
      if (!IsKind(waiting, TaskKind::kActorCreation)) {
        effects.emplace_back(effects::DiscardResult{waiting.return_id});
      }
      waiting.visible_devices.clear();
      queues_[waiting.resources].push_front(std::move(waiting));
      ++queued_;
    }
  }
  Dispatch(effects);
  return effects;
}

SchedulerEffects LocalScheduler::StopActor(const ActorKill& kill,
                                           std::chrono::steady_clock::time_point now) {
  SchedulerEffects effects;
  for (auto& [rank, worker] : workers_) {
    const bool serves = worker.actor_id == kill.id && worker.incarnation == kill.incarnation;
    const bool constructing = !worker.assigned.empty() &&
                              worker.assigned.front().actor_id == kill.id &&
                              worker.assigned.front().incarnation == kill.incarnation;
    if ((!serves && !constructing) || worker.pid <= 0 || worker.retiring) continue;
    if (serves && worker.devices.empty()) {
      worker.retiring = true;
      worker.retire_deadline = now + kRetireLimit;
      ++retiring_;
      effects.emplace_back(effects::RetireActor{rank, kill});
      continue;
    }
    // Its exit frees the grant and reports the death.
    effects.emplace_back(effects::KillWorker{worker.pid});
  }
  for (auto& [shape, tasks] : queues_) {
    const auto before = tasks.size();
    std::erase_if(tasks, [&](const TaskSpec& task) {
      return task.actor_id == kill.id && task.incarnation == kill.incarnation &&
             IsKind(task, TaskKind::kActorCreation);
    });
    queued_ -= before - tasks.size();
  }
  Dispatch(effects);
  return effects;
}

SchedulerEffects LocalScheduler::OnActorRetired(std::uint32_t worker_rank,
                                                const ActorKill& retired) {
  SchedulerEffects effects;
  auto found = workers_.find(worker_rank);
  if (found == workers_.end()) return effects;
  Worker& worker = found->second;
  // Killed as overdue meanwhile (its exit comes): not idle.
  if (!worker.retiring || worker.actor_id != retired.id ||
      worker.incarnation != retired.incarnation ||
      worker.retire_deadline == std::chrono::steady_clock::time_point::max()) {
    return effects;
  }
  worker.retiring = false;
  --retiring_;
  --actor_workers_;
  worker.actor_id = 0;
  worker.incarnation = 0;
  ReleaseGrant(worker);
  MarkIdle(worker_rank, worker);
  // The actor ended as a killed process's would: its directory entry dies
  // or restarts; the process lives on.
  effects.emplace_back(effects::ActorProcessDied{ActorDeath{.id = retired.id,
                                                            .incarnation = retired.incarnation,
                                                            .node = config_.node_id,
                                                            .pid = worker.pid,
                                                            .cause = "was ended by Kill"}});
  Dispatch(effects);
  return effects;
}

bool LocalScheduler::ServesActor(std::uint32_t rank, std::uint64_t actor_id,
                                 std::int32_t incarnation) const {
  auto found = workers_.find(rank);
  return found != workers_.end() && found->second.actor_id == actor_id &&
         found->second.incarnation == incarnation;
}

void LocalScheduler::MarkIdle(std::uint32_t rank, Worker& worker,
                              std::chrono::steady_clock::time_point now) {
  worker.idle_since = now;
  idle_.push_back(rank);
}

bool LocalScheduler::HasSurplusIdle() const {
  return SurplusIdle() > 0;
}

std::size_t LocalScheduler::TaskWorkersWaitingInGet() const {
  // A constructor waiting in Get lends its CPUs too, but counts as an
  // actor's worker already (constructing_).
  return static_cast<std::size_t>(
      std::count_if(workers_.begin(), workers_.end(), [](const auto& entry) {
        const Worker& worker = entry.second;
        return worker.lent_cpus > 0 && !worker.assigned.empty() &&
               IsKind(worker.assigned.front(), TaskKind::kFunction);
      }));
}

std::size_t LocalScheduler::SurplusIdle() const {
  // A worker running a constructor is an actor's already; one waiting in
  // Get does not count (Dispatch started another for it).
  std::size_t task_workers = workers_.size() - actor_workers_ - constructing_ - ending_;
  if (idle_.empty() || task_workers <= config_.max_workers) return 0;  // the common case, cheaply
  task_workers -= std::min(task_workers, TaskWorkersWaitingInGet());
  if (task_workers <= config_.max_workers) return 0;
  return std::min(idle_.size(), task_workers - config_.max_workers);
}

SchedulerEffects LocalScheduler::EndOverdue(std::chrono::steady_clock::time_point now) {
  SchedulerEffects effects;
  for (auto& [rank, worker] : workers_) {
    if (worker.pid <= 0) continue;
    if (worker.retiring && worker.retire_deadline <= now) {
      // Its exit frees the grant and reports the death; asked once.
      worker.retire_deadline = std::chrono::steady_clock::time_point::max();
      effects.emplace_back(effects::KillWorker{worker.pid});
    }
    if (worker.ending && worker.end_reply_deadline <= now) {
      // Asked to end and silent: an idle worker that cannot answer is
      // broken, whatever it owns.
      worker.end_reply_deadline = std::chrono::steady_clock::time_point::max();
      effects.emplace_back(effects::KillWorker{worker.pid});
    }
  }
  // The longest idle first: idle_ is a stack, its front the oldest.
  std::size_t surplus = SurplusIdle();
  for (auto position = idle_.begin(); surplus > 0 && position != idle_.end();) {
    Worker& worker = workers_[*position];
    if (worker.idle_since + kSurplusIdleLimit > now) break;
    if (worker.pid <= 0) {
      ++position;
      continue;
    }
    worker.ending = true;
    worker.end_reply_deadline = now + kRetireLimit;
    ++ending_;
    effects.emplace_back(effects::AskWorkerToEnd{*position});
    position = idle_.erase(position);
    --surplus;
  }
  return effects;
}

SchedulerEffects LocalScheduler::OnWorkerEndReply(std::uint32_t worker_rank,
                                                  std::uint64_t owned_objects,
                                                  std::chrono::steady_clock::time_point now) {
  SchedulerEffects effects;
  auto found = workers_.find(worker_rank);
  // Not asked, or already being killed for answering too late.
  if (found == workers_.end() || !found->second.ending ||
      found->second.end_reply_deadline == std::chrono::steady_clock::time_point::max()) {
    return effects;
  }
  Worker& worker = found->second;
  worker.end_reply_deadline = std::chrono::steady_clock::time_point::max();
  if (owned_objects == 0) {
    effects.emplace_back(effects::KillWorker{worker.pid});
    return effects;
  }
  // Other processes may still read what it owns, and those objects end
  // with it: it stays, idle, and is asked again kSurplusIdleLimit from now
  // (a message a second while it owns any, as Ray's idle worker killing).
  worker.ending = false;
  --ending_;
  MarkIdle(worker_rank, worker, now);
  Dispatch(effects);
  return effects;
}

std::vector<std::uint32_t> LocalScheduler::RegisteredWorkers() const {
  std::vector<std::uint32_t> ranks;
  for (const auto& [rank, worker] : workers_) {
    if (worker.registered) ranks.push_back(rank);
  }
  return ranks;
}

std::optional<std::chrono::steady_clock::time_point> LocalScheduler::NextDeadline() const {
  std::optional<std::chrono::steady_clock::time_point> next;
  // max: a process being killed, whose exit is awaited, not a deadline.
  const auto earlier = [&next](std::chrono::steady_clock::time_point when) {
    if (when == std::chrono::steady_clock::time_point::max()) return;
    if (!next || when < *next) next = when;
  };
  if (HasSurplusIdle()) {
    earlier(workers_.at(idle_.front()).idle_since + kSurplusIdleLimit);
  }
  if (retiring_ == 0 && ending_ == 0) return next;
  for (const auto& [rank, worker] : workers_) {
    if (worker.retiring) earlier(worker.retire_deadline);
    if (worker.ending) earlier(worker.end_reply_deadline);
  }
  return next;
}

void LocalScheduler::FailQueued(OutcomeKind kind, const std::string& message,
                                SchedulerEffects& effects) {
  std::map<sched::ResourceMap, std::deque<TaskSpec>> failed;
  failed.swap(queues_);
  queued_ = 0;
  for (const auto& [shape, tasks] : failed) {
    for (const auto& spec : tasks) {
      effects.emplace_back(effects::DeliverOutcome{OutcomeFor(spec, kind, message)});
    }
  }
}

std::map<std::string, FunctionTasks> LocalScheduler::CurrentTasks() const {
  std::map<std::string, FunctionTasks> tasks;
  for (const auto& [shape, waiting] : queues_) {
    for (const TaskSpec& spec : waiting) ++tasks[DisplayName(spec)].queued;
  }
  for (const auto& [rank, worker] : workers_) {
    for (const TaskSpec& spec : worker.assigned) ++tasks[DisplayName(spec)].running;
  }
  return tasks;
}

bool LocalScheduler::NeedsBroadcast() const {
  return !nodes_.empty() && (dirty_ || queued_ != last_broadcast_queued_);
}

ResourceUpdate LocalScheduler::MarkBroadcast() {
  dirty_ = false;
  last_broadcast_queued_ = queued_;
  return ResourceUpdate{.node_id = config_.node_id,
                        .available = available_,
                        .queued = static_cast<std::uint32_t>(queued_)};
}

}  // namespace sray::core
