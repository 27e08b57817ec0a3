#include "core/actor_client.h"

#include <algorithm>
#include <limits>

#include "core/owner.h"
#include "sray/errors.h"

namespace sray::core {
namespace {

[[noreturn]] void ThrowStatus(const Status& status, const std::string& what) {
  std::string message = status.message();
  if (!message.starts_with("sray: ")) message = "sray: " + what + ": " + message;
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kAlreadyExists: throw ConfigError(message);
    case StatusCode::kResourceExhausted: throw InfeasibleResourcesError(message);
    default: throw Error(message);
  }
}

ActorState StateOf(const ActorInfo& info) {
  return static_cast<ActorState>(info.state);
}

}  // namespace

ActorClient::ActorClient(Owner& owner, HeadService& head, transport::Transport& transport,
                         std::shared_ptr<transport::AddressBook> address_book, std::string hostname)
    : owner_(owner),
      head_(head),
      transport_(transport),
      address_book_(std::move(address_book)),
      hostname_(std::move(hostname)) {
  if (auto address = transport_.LocalAddress(false); address.ok()) {
    own_address_ = std::string(transport::TextOf(*address));
  }
  transport_.RegisterOneWayHandler(kActorCallDone, [this](std::uint32_t sender, auto payload) {
    auto outcome = Decode<TaskOutcome>(payload, "actor call outcome");
    if (outcome.ok()) OnReply(sender, std::move(outcome).value());
  });
}

ActorClient::~ActorClient() {
  Stop();
}

void ActorClient::Stop() {
  std::lock_guard lock(mutex_);
  stopped_ = true;
}

std::size_t ActorClient::KnownActors() {
  std::lock_guard lock(mutex_);
  return actors_.size();
}

std::string ActorClient::Label(internal::ActorId actor, const ActorEntry& entry) const {
  if (entry.info && !entry.info->name.empty()) return "actor '" + entry.info->name + "'";
  std::string label = "anonymous actor " + std::to_string(actor);
  if (entry.info) label += " (" + entry.info->factory + ")";
  return label;
}

internal::ActorId ActorClient::Create(const std::string& factory,
                                      std::vector<internal::TaskArgument> arguments,
                                      const internal::ActorOptions& options) {
  ActorCreation creation;
  creation.factory = factory;
  creation.name = options.name;
  creation.resources = options.resources;
  creation.max_restarts = options.max_restarts;
  creation.max_task_retries = options.max_task_retries;
  creation.max_concurrency = options.max_concurrency;
  creation.placement_group = options.placement_group;
  creation.bundle_index = options.bundle_index;
  internal::ContainedRefs constructor_refs;
  for (auto& argument : arguments) {
    for (auto& handle : argument.contained) constructor_refs.push_back(std::move(handle));
    ArgumentSpec spec;
    if (argument.reference) {
      // A restart re-runs the constructor with the same bytes, so the
      // values are fetched once, here.
      const auto values = owner_.Get({argument.reference->id()}, std::nullopt);
      spec.value = std::string(values.front()->bytes());
    } else {
      spec.value = std::move(argument.value);
    }
    creation.arguments.push_back(std::move(spec));
  }
  auto info = head_.CreateActor(creation);
  if (!info.ok()) ThrowStatus(info.status(), "cannot create actor " + factory);
  Actions actions;
  {
    std::lock_guard lock(mutex_);
    auto found = actors_.try_emplace(info->id).first;
    ActorEntry& entry = found->second;
    entry.constructor_refs = std::move(constructor_refs);
    LearnLocked(entry, *info);
    // The constructor's references are held until the actor is dead, which
    // this process learns through its open question to the head: asked at
    // once here, since an actor that is never called would never ask, and
    // would keep them for the whole job. Without references nothing waits
    // for the death, and the question starts with the first call.
    if (!entry.constructor_refs.empty()) FlushLocked(info->id, entry, actions);
    ForgetIfDoneLocked(found);  // dead already (its constructor's group is gone, say)
  }
  Perform(std::move(actions));
  return info->id;
}

std::optional<internal::NamedActor> ActorClient::FindNamed(const std::string& name) {
  auto info = head_.LookupActor(name);
  if (!info.ok()) {
    if (info.status().code() == StatusCode::kNotFound) return std::nullopt;
    ThrowStatus(info.status(), "cannot look up actor '" + name + "'");
  }
  if (StateOf(*info) == ActorState::kDead) return std::nullopt;
  {
    std::lock_guard lock(mutex_);
    LearnLocked(actors_[info->id], *info);
  }
  return internal::NamedActor{.id = info->id, .max_task_retries = info->max_task_retries};
}

void ActorClient::Kill(internal::ActorId actor, bool no_restart) {
  const Status killed =
      head_.KillActor(ActorKill{.id = actor, .no_restart = no_restart, .incarnation = 0});
  if (!killed.ok()) ThrowStatus(killed, "cannot kill actor " + std::to_string(actor));
  if (!no_restart) return;
  Actions actions;
  {
    std::lock_guard lock(mutex_);
    // The head may have told this process of the death already, inside
    // KillActor (the driver's head answers at once), and the entry may be
    // forgotten: nothing is left to fail, and a new entry would stay for good.
    auto found = actors_.find(actor);
    if (found == actors_.end()) return;
    ActorEntry& entry = found->second;
    ActorInfo dead = entry.info.value_or(ActorInfo{});
    dead.id = actor;
    dead.state = static_cast<std::uint8_t>(ActorState::kDead);
    dead.cause = "it was killed by ActorHandle::Kill()";
    LearnLocked(entry, dead);
    FailLostLocked(entry, actions);
    FlushLocked(actor, entry, actions);
    ForgetIfDoneLocked(found);
  }
  Perform(std::move(actions));
}

std::uint64_t ActorClient::CreatePlacementGroup(
    const std::string& name, const std::vector<std::map<std::string, double>>& bundles,
    PlacementStrategy strategy) {
  PlacementGroupCreation creation;
  creation.name = name;
  creation.strategy = strategy;
  for (const auto& bundle : bundles) creation.bundles.emplace_back(bundle.begin(), bundle.end());
  auto info = head_.CreatePlacementGroup(creation);
  if (!info.ok()) ThrowStatus(info.status(), "cannot create placement group");
  return info->id;
}

internal::PlacementGroupState ActorClient::WaitPlacementGroup(std::uint64_t id,
                                                              internal::Timeout timeout) {
  auto info = head_.WaitPlacementGroup(id, timeout);
  if (!info.ok())
    ThrowStatus(info.status(), "cannot wait for placement group " + std::to_string(id));
  return internal::PlacementGroupState{
      .placed = info->placed, .removed = info->removed, .bundle_nodes = info->bundle_nodes};
}

void ActorClient::RemovePlacementGroup(std::uint64_t id) {
  const Status removed = head_.RemovePlacementGroup(id);
  if (!removed.ok()) ThrowStatus(removed, "cannot remove placement group " + std::to_string(id));
}

void ActorClient::Enqueue(internal::ActorId actor, std::uint64_t task_id) {
  std::lock_guard lock(mutex_);
  actors_[actor].calls.emplace(task_id, Call{.task_id = task_id,
                                             .state = CallState::kWaitingArguments,
                                             .spec = {},
                                             .sent_incarnation = -1});
}

void ActorClient::Send(TaskSpec spec) {
  Actions actions;
  {
    std::lock_guard lock(mutex_);
    const internal::ActorId actor = spec.actor_id;
    ActorEntry& entry = actors_[actor];
    const std::uint64_t task_id = spec.task_id;
    Call& call = entry.calls[task_id];
    call.task_id = task_id;
    call.spec = std::move(spec);
    call.state = CallState::kReady;
    entry.unsent_from = std::min(entry.unsent_from, task_id);
    FlushLocked(actor, entry, actions);
  }
  Perform(std::move(actions));
}

void ActorClient::Finished(internal::ActorId actor, std::uint64_t task_id) {
  Actions actions;
  {
    std::lock_guard lock(mutex_);
    auto found = actors_.find(actor);
    if (found == actors_.end()) return;
    ActorEntry& entry = found->second;
    auto call = entry.calls.find(task_id);
    if (call == entry.calls.end()) return;
    if (call->second.state == CallState::kSent) --entry.in_flight;
    entry.calls.erase(call);
    FlushLocked(actor, entry, actions);
    ForgetIfDoneLocked(found);
  }
  Perform(std::move(actions));
}

void ActorClient::ForgetIfDoneLocked(std::unordered_map<internal::ActorId, ActorEntry>::iterator found) {
  const ActorEntry& entry = found->second;
  // A dead actor with nothing left to answer: its entry goes, or a program
  // that makes actors all day would keep one per actor. A later call through
  // a copy of its handle asks the head again and fails with the cause.
  if (entry.info && StateOf(*entry.info) == ActorState::kDead && entry.calls.empty() &&
      !entry.asking && entry.constructor_refs.empty()) {
    actors_.erase(found);
  }
}

void ActorClient::LearnLocked(ActorEntry& entry, const ActorInfo& info) {
  const bool newer = !entry.info || info.incarnation > entry.info->incarnation ||
                     StateOf(info) == ActorState::kDead ||
                     (info.incarnation == entry.info->incarnation &&
                      info.state != entry.info->state && StateOf(*entry.info) != ActorState::kDead);
  if (!newer) return;
  entry.info = info;
  if (StateOf(info) == ActorState::kAlive && address_book_) {
    transport::AddressBook::Entry book_entry;
    book_entry.address = transport::BytesOf(info.worker_address);
    // Only a process on this host can be probed by pid.
    book_entry.pid = info.hostname == hostname_ ? static_cast<pid_t>(info.pid) : 0;
    book_entry.description =
        (info.name.empty() ? "actor " + std::to_string(info.id) : "actor '" + info.name + "'") +
        " (pid " + std::to_string(info.pid) + ", node " + std::to_string(info.node) + ")";
    address_book_->Add(info.worker_rank, std::move(book_entry));
  }
}

TaskOutcome ActorClient::LostOutcome(const ActorEntry& entry, const TaskSpec& spec) const {
  const ActorInfo& info = *entry.info;
  const std::string label = Label(spec.actor_id, entry);
  const bool dead = StateOf(info) == ActorState::kDead;
  TaskOutcome outcome =
      FailedOutcome(spec, dead ? OutcomeKind::kActorDied : OutcomeKind::kActorRestarting,
                    dead ? label + " is dead: " + info.cause
                         : "the call was lost when " + label + "'s process died (" + info.cause +
                               "): raise the actor's SetMaxTaskRetries to retry such calls");
  outcome.error_type = label;
  outcome.node = info.node;
  return outcome;
}

void ActorClient::FailLostLocked(ActorEntry& entry, Actions& actions) {
  const ActorInfo& info = *entry.info;
  const bool dead = StateOf(info) == ActorState::kDead;
  for (auto& [task_id, call] : entry.calls) {
    const bool lost =
        call.state == CallState::kSent && (dead || call.sent_incarnation < info.incarnation);
    if (lost || (dead && call.state == CallState::kReady)) {
      actions.failures.push_back(LostOutcome(entry, call.spec));
      // Its process may have stored the result and died before answering.
      // The node manager frees only that attempt's entry, once its process
      // has ended or the incarnation retired.
      if (lost) {
        actions.orphans.push_back(OrphanedResult{.id = call.spec.return_id,
                                                 .node = call.sent_node,
                                                 .made_by = call.sent_rank,
                                                 .actor_id = call.spec.actor_id,
                                                 .incarnation = call.sent_incarnation});
      }
      if (call.state == CallState::kSent) --entry.in_flight;
      call.state = CallState::kLost;
      entry.unsent_from = std::min(entry.unsent_from, task_id);
    }
  }
}

void ActorClient::FlushLocked(internal::ActorId actor, ActorEntry& entry, Actions& actions) {
  const bool dead = entry.info && StateOf(*entry.info) == ActorState::kDead;
  if (dead) {
    FailLostLocked(entry, actions);
    for (auto& handle : entry.constructor_refs) actions.released.push_back(std::move(handle));
    entry.constructor_refs.clear();
    return;
  }
  const bool alive = entry.info && StateOf(*entry.info) == ActorState::kAlive;
  // One question to the head stays open per known actor: it is answered
  // when the actor restarts or dies, which fails or retries the calls in
  // flight at once, without waiting for the transport to notice the
  // process is gone (shared-memory connections notice late).
  if (!entry.asking) {
    entry.asking = true;
    std::int32_t seen = -1;
    if (entry.info) seen = alive ? entry.info->incarnation : entry.info->incarnation - 1;
    actions.asks.emplace_back(actor, seen);
  }
  if (!alive) return;
  const ActorInfo& info = *entry.info;
  auto next = entry.calls.lower_bound(entry.unsent_from);
  for (; next != entry.calls.end(); ++next) {
    Call& call = next->second;
    if (call.state == CallState::kSent) continue;
    if (call.state != CallState::kReady) break;
    if (entry.numbered_incarnation != info.incarnation) {
      entry.numbered_incarnation = info.incarnation;
      entry.next_sequence = 0;
    }
    call.spec.incarnation = info.incarnation;
    call.spec.sequence = entry.next_sequence++;
    if (call.spec.sequence == 0) call.spec.caller_address = own_address_;
    call.sent_incarnation = info.incarnation;
    call.sent_rank = info.worker_rank;
    call.sent_node = info.node;
    call.state = CallState::kSent;
    actions.sends.push_back(
        Outgoing{.actor = actor,
                 .rank = info.worker_rank,
                 .task_id = call.task_id,
                 .incarnation = info.incarnation,
                 .payload = std::make_shared<transport::Bytes>(Encode(call.spec)),
                 .pipelined = entry.in_flight > 0});
    ++entry.in_flight;
  }
  entry.unsent_from =
      next == entry.calls.end() ? std::numeric_limits<std::uint64_t>::max() : next->first;
}

void ActorClient::Perform(Actions actions) {
  for (auto& outgoing : actions.sends) {
    // A lone call goes out from this thread; one of many is left to the
    // progress thread, which batches them.
    transport_.Post(outgoing.rank, kActorCall, std::move(*outgoing.payload), !outgoing.pipelined);
  }
  for (const auto& orphan : actions.orphans) {
    owner_.DiscardOrphanedResult(orphan);
  }
  for (auto& failure : actions.failures) owner_.OnTaskOutcome(std::move(failure));
  for (const auto& ask : actions.asks) {
    const internal::ActorId actor = ask.first;
    head_.WaitForChange(
        ActorWait{.id = actor, .seen = ask.second, .caller_rank = 0, .caller_node = 0},
        [this, actor](Result<ActorInfo> info) { OnInfo(actor, std::move(info)); });
  }
}

void ActorClient::OnReply(std::uint32_t sender, TaskOutcome outcome) {
  bool current = false;
  bool stopped = false;
  {
    std::lock_guard lock(mutex_);
    stopped = stopped_;
    auto found = stopped_ ? actors_.end() : actors_.find(outcome.actor_id);
    if (found != actors_.end()) {
      ActorEntry& entry = found->second;
      auto call = entry.calls.find(outcome.task_id);
      // Otherwise failed or retried meanwhile.
      if (call != entry.calls.end() && call->second.state == CallState::kSent &&
          call->second.sent_incarnation == outcome.incarnation) {
        --entry.in_flight;
        entry.calls.erase(call);
        current = true;
      }
    }
  }
  if (current) {
    owner_.OnTaskOutcome(std::move(outcome));
  } else {
    // The actor lent this process the references in its result: give them
    // back, or their owners keep the objects until the job ends.
    owner_.DiscardLent(outcome.contained);
    // Its stored result is nobody's now (the node manager frees that
    // attempt's entry once the answering process has ended or retired).
    if (static_cast<OutcomeKind>(outcome.kind) == OutcomeKind::kStoredValue && !stopped) {
      owner_.DiscardOrphanedResult(OrphanedResult{.id = outcome.return_id,
                                                  .node = outcome.node,
                                                  .made_by = sender,
                                                  .actor_id = outcome.actor_id,
                                                  .incarnation = outcome.incarnation});
    }
  }
}

void ActorClient::OnInfo(internal::ActorId actor, Result<ActorInfo> info) {
  Actions actions;
  {
    std::lock_guard lock(mutex_);
    if (stopped_) return;
    ActorEntry& entry = actors_[actor];
    entry.asking = false;
    ActorInfo learned;
    if (info.ok()) {
      learned = std::move(info).value();
    } else {
      learned = entry.info.value_or(ActorInfo{});
      learned.id = actor;
      learned.state = static_cast<std::uint8_t>(ActorState::kDead);
      learned.cause = "the head cannot say what became of it: " + info.status().message();
    }
    LearnLocked(entry, learned);
    if (entry.info) FailLostLocked(entry, actions);
    FlushLocked(actor, entry, actions);
    ForgetIfDoneLocked(actors_.find(actor));
  }
  Perform(std::move(actions));
}

}  // namespace sray::core
