#include "core/owner.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "common/free_memory.h"
#include "common/log.h"
#include "common/whole_number.h"
#include "core/actor_calls.h"
#include "object/mapped_file.h"
#include "sched/resources.h"
#include "sray/errors.h"

namespace sray::core {
namespace {

// A task about to run again: one more attempt, placed afresh.
void PrepareRetry(TaskSpec& spec) {
  spec.attempt++;
  spec.hops = 0;
  spec.visible_devices.clear();
}

}  // namespace

std::size_t MaxTasksInFlightOfJob() {
  const char* value = std::getenv("SRAY_MAX_TASKS_IN_FLIGHT");
  if (value == nullptr) return 0;
  return WholeNumber<std::size_t>(value).value_or(0);
}

Owner::Owner(OwnerIdentity identity, StoreAccess& store, std::function<void(TaskSpec)> submit)
    : identity_(identity), store_(store), submit_(std::move(submit)) {
  wake_token_->owner = this;
}

Owner::~Owner() {
  std::lock_guard lock(wake_token_->mutex);
  wake_token_->owner = nullptr;
}

void Owner::SetHelper(std::function<bool()> run_one_queued_task) {
  helper_ = std::move(run_one_queued_task);
}

void Owner::WakeWaiters() {
  { std::lock_guard lock(mutex_); }
  changed_.notify_all();
}

void Owner::SetBlockingNotifier(std::function<void(bool blocked)> notify) {
  blocking_notifier_ = std::move(notify);
}

void Owner::NotifyCompletionLocked(const internal::ObjectId& id) {
  if (watchers_.empty()) return;
  auto found = watchers_.find(id);
  if (found == watchers_.end()) return;
  bool wake = false;
  for (Waiter* waiter : found->second) {
    if (waiter->completions_needed > 0 && --waiter->completions_needed == 0) wake = true;
  }
  watchers_.erase(found);
  if (wake) changed_.notify_all();
}

internal::ObjectId Owner::SubmitTask(const std::string& function,
                                     std::vector<internal::TaskArgument> arguments,
                                     const internal::TaskOptions& options) {
  auto resources = sched::NormalizeRequest(options.resources);
  if (!resources.ok()) {
    throw ConfigError("sray: task " + function +
                      ": bad resource request: " + resources.status().message());
  }
  TaskSpec spec;
  spec.function = function;
  spec.name = options.name;
  spec.resources = std::move(resources).value();
  return Submit(std::move(spec), std::move(arguments), options.max_retries,
                options.retry_exceptions);
}

internal::ObjectId Owner::SubmitActorTask(internal::ActorId actor, int max_task_retries,
                                          const std::string& method,
                                          std::vector<internal::TaskArgument> arguments,
                                          const std::string& name) {
  Actors();  // fails before anything is added when actors are unavailable
  TaskSpec spec;
  spec.function = method;
  spec.name = name;
  spec.kind = TaskKind::kActorMethod;
  spec.actor_id = actor;
  return Submit(std::move(spec), std::move(arguments), max_task_retries, false);
}

internal::ObjectId Owner::Submit(TaskSpec spec, std::vector<internal::TaskArgument> arguments,
                                 int max_retries, bool retry_exceptions) {
  Followups followups;
  internal::ObjectId id;
  {
    // Declared before the lock: "running" again is said once the lock is
    // released and before the task is sent, so the node never counts the
    // CPUs both lent and taken.
    BlockedScope blocked(blocking_notifier_, blocked_depth_);
    std::unique_lock lock(mutex_);
    const bool counted = spec.kind == TaskKind::kFunction;
    if (counted) WaitForRoomLocked(lock, blocked);
    id = internal::ObjectId{identity_.rank, next_index_++};
    const std::uint64_t task_id = next_task_++;
    PendingTask task;
    task.spec = std::move(spec);
    task.spec.task_id = task_id;
    task.spec.return_id = id;
    task.spec.owner_rank = identity_.rank;
    task.spec.owner_node = identity_.node_id;
    task.max_retries = std::max(0, max_retries);
    task.retry_exceptions = retry_exceptions;
    task.spec.arguments.reserve(arguments.size());
    for (auto& argument : arguments) {
      // Held until the task is done: its worker registers as a borrower
      // of each before then.
      for (auto& handle : argument.contained) task.argument_handles.push_back(std::move(handle));
      ArgumentSpec argument_spec;
      if (argument.reference) {
        argument_spec.by_reference = true;
        argument_spec.id = argument.reference->id();
        auto found = objects_.find(argument_spec.id);
        if (found != objects_.end()) found->second.task_uses++;
        task.argument_handles.push_back(std::move(argument.reference));
      } else {
        argument_spec.value = std::move(argument.value);
      }
      task.spec.arguments.push_back(std::move(argument_spec));
    }
    if (task.spec.kind == TaskKind::kActorMethod) {
      // Under the lock: the actor's queue then has submission order.
      Actors().Enqueue(task.spec.actor_id, task_id);
    }
    ObjectEntry entry;
    entry.producer = DisplayName(task.spec);
    objects_.emplace(id, std::move(entry));
    auto [inserted, unused] = tasks_.emplace(task_id, std::move(task));
    if (counted) CountInFlightLocked(inserted->second);
    ResolveArgumentsLocked(inserted->second, followups);
  }
  RunFollowups(std::move(followups));
  return id;
}

void Owner::RunFollowups(Followups followups) {
  for (auto& ready : followups.to_send) SendTask(std::move(ready));
  for (auto& failure : followups.to_fail) OnTaskOutcome(std::move(failure));
  for (auto& question : followups.to_ask) {
    borrowed_->RequestStatus(
        question.id,
        [this, question](Result<ObjectStatus> status) {
          OnArgumentStatus(question, std::move(status));
        },
        question.lost_on_node, question.rebuilds_seen);
  }
}

void Owner::SendTask(TaskSpec spec) {
  if (spec.kind == TaskKind::kActorMethod) {
    Actors().Send(std::move(spec));
  } else {
    submit_(std::move(spec));
  }
}

void Owner::SetActorCalls(ActorCalls* actors) {
  actor_calls_.store(actors);
}

ActorCalls& Owner::Actors() {
  ActorCalls* client = actor_calls_.load();
  if (client == nullptr) {
    throw Error(
        "sray: actors are not available in this process: use them after sray::Init, "
        "and not after sray::Shutdown");
  }
  return *client;
}

internal::ActorId Owner::CreateActor(const std::string& factory,
                                     std::vector<internal::TaskArgument> arguments,
                                     const internal::ActorOptions& options) {
  return Actors().Create(factory, std::move(arguments), options);
}

std::optional<internal::NamedActor> Owner::FindNamedActor(const std::string& name) {
  return Actors().FindNamed(name);
}

void Owner::KillActor(internal::ActorId actor, bool no_restart) {
  Actors().Kill(actor, no_restart);
}

std::uint64_t Owner::CreatePlacementGroup(const std::string& name,
                                          const std::vector<std::map<std::string, double>>& bundles,
                                          PlacementStrategy strategy) {
  return Actors().CreatePlacementGroup(name, bundles, strategy);
}

internal::PlacementGroupState Owner::WaitPlacementGroup(std::uint64_t id,
                                                        internal::Timeout timeout) {
  return Actors().WaitPlacementGroup(id, timeout);
}

void Owner::RemovePlacementGroup(std::uint64_t id) {
  Actors().RemovePlacementGroup(id);
}

void Owner::AskOwnerLocked(PendingTask& task, std::size_t index, bool lost, Followups& followups) {
  if (std::find(task.asked_owner.begin(), task.asked_owner.end(), index) !=
      task.asked_owner.end()) {
    return;  // asked already; one answer resolves it
  }
  task.asked_owner.push_back(index);
  const ArgumentSpec& argument = task.spec.arguments[index];
  followups.to_ask.push_back(OwnerQuestion{
      .task_id = task.spec.task_id,
      .index = index,
      .id = argument.id,
      .lost_on_node = lost ? std::optional<std::uint32_t>(argument.node) : std::nullopt,
      .rebuilds_seen = lost ? argument.rebuilds_seen : std::uint16_t{0}});
}

void Owner::ResolveArgumentsLocked(PendingTask& task, Followups& followups) {
  auto& to_fail = followups.to_fail;
  task.unresolved = 0;
  for (std::size_t index = 0; index < task.spec.arguments.size(); ++index) {
    ArgumentSpec& argument = task.spec.arguments[index];
    // Resolved references carry a node and size, or became inline values.
    if (!argument.by_reference || argument.size != 0 || argument.node != 0) continue;
    if (!Owns(argument.id)) {
      // Borrowed: its owner says where it is once it is ready.
      AskOwnerLocked(task, index, /*lost=*/false, followups);
      task.unresolved++;
      continue;
    }
    auto found = objects_.find(argument.id);
    if (found == objects_.end()) {
      to_fail.push_back(FailedOutcome(task.spec, OutcomeKind::kSystemError,
                                      "argument object " + argument.id.ToString() +
                                          " is no longer held by this process: keep its "
                                          "ObjectRef until the task is submitted"));
      return;
    }
    const ObjectEntry& entry = found->second;
    switch (entry.state) {
      case State::kPending: {
        auto& waiters = waiting_[argument.id];
        if (std::find(waiters.begin(), waiters.end(), task.spec.task_id) == waiters.end()) {
          waiters.push_back(task.spec.task_id);
        }
        task.unresolved++;
        break;
      }
      case State::kFailed: {
        TaskOutcome failure = *entry.failure;
        failure.task_id = task.spec.task_id;
        failure.attempt = task.spec.attempt;
        failure.return_id = task.spec.return_id;
        failure.owner_rank = task.spec.owner_rank;
        failure.owner_node = task.spec.owner_node;
        to_fail.push_back(std::move(failure));
        return;
      }
      case State::kReady:
        if (entry.in_store) {
          argument.node = entry.node;
          argument.size = entry.size;
          argument.rebuilds_seen = entry.rebuilds;
          // node 0 with size 0 would read as unresolved; an empty stored
          // object does not exist (empty values travel inline).
        } else {
          argument.by_reference = false;
          argument.value = entry.inline_value;
        }
        break;
    }
  }
  if (task.unresolved == 0 && !task.sent) {
    task.sent = true;
    followups.to_send.push_back(task.spec);
  }
}

void Owner::ReleaseIfUnusedLocked(
    const internal::ObjectId& id,
    std::vector<std::pair<internal::ObjectId, std::uint32_t>>& to_free,
    std::vector<std::shared_ptr<internal::ObjectHandle>>& released) {
  auto found = objects_.find(id);
  if (found == objects_.end()) return;
  ObjectEntry& entry = found->second;
  if (entry.handles > 0 || entry.task_uses > 0 || entry.state == State::kPending) return;
  if (entry.sharing) {
    if (!entry.sharing->borrowers.empty()) return;
    for (auto& handle : entry.sharing->contained) released.push_back(std::move(handle));
  }
  if (entry.in_store) to_free.emplace_back(id, entry.node);
  objects_.erase(found);
  auto lineage = lineage_.find(id);
  if (lineage != lineage_.end()) {
    for (auto& handle : lineage->second.argument_handles) released.push_back(std::move(handle));
    lineage_.erase(lineage);
  }
}

bool Owner::Reconstruct(const internal::ObjectId& id, std::uint32_t lost_on_node,
                        std::uint16_t rebuilds_seen) {
  std::vector<TaskSpec> to_send;
  std::vector<std::pair<internal::ObjectId, std::uint32_t>> to_free;
  bool started = false;
  {
    std::lock_guard lock(mutex_);
    started = ReconstructLocked(id, lost_on_node, rebuilds_seen, to_send, to_free);
  }
  for (const auto& [object, node] : to_free) store_.Free(object, node);
  for (auto& spec : to_send) SendTask(std::move(spec));
  return started;
}

bool Owner::ReconstructLocked(const internal::ObjectId& id, std::uint32_t lost_on_node,
                              std::uint16_t rebuilds_seen, std::vector<TaskSpec>& to_send,
                              std::vector<std::pair<internal::ObjectId, std::uint32_t>>& to_free) {
  auto entry = objects_.find(id);
  if (entry == objects_.end()) return false;
  // Someone else already started it again, or a copy was made since the one
  // found lost (freeing "the lost copy" now would free that one).
  if (entry->second.state == State::kPending || entry->second.rebuilds != rebuilds_seen)
    return true;
  auto lineage = lineage_.find(id);
  if (lineage == lineage_.end()) return false;
  PendingTask& task = lineage->second;
  if (RetriesUsed(task) >= task.max_retries) return false;
  PrepareRetry(task.spec);
  task.sent = true;
  for (const auto& argument : task.spec.arguments) {
    auto used = objects_.find(argument.id);
    if (used != objects_.end()) used->second.task_uses++;
  }
  entry->second.state = State::kPending;
  entry->second.in_store = false;
  ++entry->second.rebuilds;
  to_send.push_back(task.spec);
  auto [inserted, unused] = tasks_.emplace(task.spec.task_id, std::move(task));
  // Counted so that its end balances, though it did not wait for room.
  CountInFlightLocked(inserted->second);
  lineage_.erase(lineage);
  to_free.emplace_back(id, lost_on_node);  // the stale record of the lost copy
  return true;
}

std::string Owner::WhyNotRecomputedLocked(const internal::ObjectId& id,
                                          const ObjectEntry& entry) const {
  if (entry.producer.empty()) {
    return "it was Put, not computed by a task: keep a copy of data you Put, or Put it again";
  }
  if (!lineage_.contains(id)) {
    return "actor call " + entry.producer +
           " returned it, and an actor's state has moved on since: keep a copy, or Put it";
  }
  return "task " + entry.producer + " has no retries left: raise its SetMaxRetries";
}

bool Owner::RunAgainWithLostArgumentLocked(
    PendingTask& task, TaskOutcome& outcome, Followups& followups,
    std::vector<std::pair<internal::ObjectId, std::uint32_t>>& to_free) {
  const auto decline = [&outcome](const std::string& why) {
    outcome.error_message += ": " + why;
    return false;
  };
  if (outcome.size >= task.spec.arguments.size()) {
    return decline("the worker named no argument of the task (this is a bug, please report it)");
  }
  // Actor calls keep their order in the actor: one is not held back while
  // an argument is rebuilt. The actor itself has its caller rebuild it (or
  // ask its owner to) while it waits (core/task_execution.cc); this is what
  // it could not.
  if (task.spec.kind != TaskKind::kFunction) {
    return decline(
        "the actor asked its caller to have the argument rebuilt, and that failed: keep a "
        "copy, or pass it by value");
  }
  const std::size_t index = outcome.size;
  ArgumentSpec& argument = task.spec.arguments[index];
  if (!argument.by_reference) return decline("it was not passed by reference (this is a bug)");
  if (!Owns(argument.id)) {
    // Borrowed: its owner rebuilds it and answers once it is ready again (or
    // why it cannot be, which then fails the task).
    AskOwnerLocked(task, index, /*lost=*/true, followups);
  } else {
    auto entry = objects_.find(argument.id);
    if (entry == objects_.end()) return decline("this process no longer holds it");
    if (entry->second.state == State::kReady && entry->second.in_store &&
        !ReconstructLocked(argument.id, argument.node, argument.rebuilds_seen, followups.to_send,
                           to_free)) {
      return decline("it cannot be recomputed: " +
                     WhyNotRecomputedLocked(argument.id, entry->second));
    }
  }
  // Run again once the argument is resolved anew: when its rebuilt copy is
  // ready, or at once when a rebuild came first. The loss is not the task's:
  // its retries stay as they were (the argument's producer spends its own).
  PrepareRetry(task.spec);
  ++task.argument_resends;
  argument.node = 0;
  argument.size = 0;
  task.sent = false;
  ResolveArgumentsLocked(task, followups);
  return true;
}

void Owner::OnTaskOutcome(TaskOutcome outcome) {
  Followups followups;
  auto& to_send = followups.to_send;
  std::vector<std::pair<internal::ObjectId, std::uint32_t>> to_free;
  std::vector<std::shared_ptr<internal::ObjectHandle>> released;
  std::vector<std::pair<internal::ActorId, std::uint64_t>> finished_actor_calls;
  std::vector<std::function<void()>> answers;
  auto kind = static_cast<OutcomeKind>(outcome.kind);
  {
    std::lock_guard lock(mutex_);
    // The references packed in the value: this process was registered as
    // their borrower; their handles live as long as the value.
    internal::ContainedRefs contained;
    contained.reserve(outcome.contained.size());
    for (const ContainedRef& reference : outcome.contained) {
      contained.push_back(AdoptLocked(reference));
    }
    auto found = tasks_.find(outcome.task_id);
    if (found != tasks_.end() && !found->second.sent &&
        outcome.attempt < found->second.spec.attempt) {
      // An earlier attempt's, while the next one waits for its arguments:
      // the task is not running anywhere now. (Once it is sent again, an
      // earlier attempt's result is still taken: an actor's call may end
      // in the same node and store as its retry, and dropping one frees
      // both.)
      if (kind == OutcomeKind::kStoredValue) to_free.emplace_back(outcome.return_id, outcome.node);
      for (auto& handle : contained) released.push_back(std::move(handle));
    } else if (found == tasks_.end() || found->second.spec.return_id != outcome.return_id) {
      // A late duplicate (the task was retried elsewhere): drop its value.
      if (kind == OutcomeKind::kStoredValue) to_free.emplace_back(outcome.return_id, outcome.node);
      for (auto& handle : contained) released.push_back(std::move(handle));
    } else {
      PendingTask& task = found->second;
      const bool run_again = kind == OutcomeKind::kArgumentLost &&
                             RunAgainWithLostArgumentLocked(task, outcome, followups, to_free);
      if (kind == OutcomeKind::kArgumentLost && !run_again) {
        // Final: kArgumentLost is a worker's report only, never a stored failure.
        kind = OutcomeKind::kObjectLost;
        outcome.kind = static_cast<std::uint8_t>(kind);
      }
      // Only a task that was sent can have died or thrown: a failure of one
      // still waiting is its argument's, copied, and final.
      const bool retry =
          task.sent && RetriesUsed(task) < task.max_retries &&
          (kind == OutcomeKind::kWorkerDied || kind == OutcomeKind::kActorRestarting ||
           (kind == OutcomeKind::kTaskThrew && task.retry_exceptions));
      if (run_again) {
        for (auto& handle : contained) released.push_back(std::move(handle));
      } else if (retry) {
        PrepareRetry(task.spec);
        to_send.push_back(task.spec);
        for (auto& handle : contained) released.push_back(std::move(handle));
      } else {
        ObjectEntry& entry = objects_[outcome.return_id];
        // A recomputed result replaces what the lost one held; those handles
        // go once the lock is released (their destructors take it).
        if (entry.sharing) {
          for (auto& handle : entry.sharing->contained) released.push_back(std::move(handle));
          entry.sharing->contained.clear();
        }
        if (!contained.empty()) entry.shared().contained = std::move(contained);
        switch (kind) {
          case OutcomeKind::kInlineValue:
            entry.state = State::kReady;
            entry.inline_value = std::move(outcome.value);
            break;
          case OutcomeKind::kStoredValue:
            entry.state = State::kReady;
            entry.in_store = true;
            entry.node = outcome.node;
            entry.size = outcome.size;
            break;
          default:
            entry.state = State::kFailed;
            if (outcome.function.empty()) outcome.function = DisplayName(task.spec);
            outcome.error_message += kind == OutcomeKind::kWorkerDied
                                         ? " (attempts: " + std::to_string(RetriesUsed(task) + 1) +
                                               ", max_retries=" + std::to_string(task.max_retries) +
                                               ")"
                                         : "";
            entry.failure = std::make_shared<const TaskOutcome>(outcome);
            break;
        }
        if (entry.sharing && !entry.sharing->status_waiters.empty()) {
          for (auto& waiter : std::exchange(entry.sharing->status_waiters, {})) {
            answers.emplace_back(
                [waiter = std::move(waiter), status = StatusOf(entry)] { waiter(status); });
          }
        }
        for (const auto& argument : task.spec.arguments) {
          auto used = objects_.find(argument.id);
          if (used != objects_.end() && used->second.task_uses > 0) {
            used->second.task_uses--;
            ReleaseIfUnusedLocked(argument.id, to_free, released);
          }
        }
        UncountInFlightLocked(task);
        if (task.spec.kind == TaskKind::kActorMethod) {
          // An actor's state moved on: its results cannot be recomputed.
          finished_actor_calls.emplace_back(task.spec.actor_id, task.spec.task_id);
          for (auto& handle : task.argument_handles) released.push_back(std::move(handle));
        } else if (kind == OutcomeKind::kStoredValue) {
          lineage_[outcome.return_id] = std::move(task);
        } else {
          for (auto& handle : task.argument_handles) released.push_back(std::move(handle));
        }
        tasks_.erase(found);
        ReleaseIfUnusedLocked(outcome.return_id, to_free, released);
        auto waiters = waiting_.find(outcome.return_id);
        if (waiters != waiting_.end()) {
          const std::vector<std::uint64_t> dependents = std::move(waiters->second);
          waiting_.erase(waiters);
          for (const auto dependent : dependents) {
            auto task_entry = tasks_.find(dependent);
            if (task_entry != tasks_.end()) {
              ResolveArgumentsLocked(task_entry->second, followups);
            }
          }
        }
        NotifyCompletionLocked(outcome.return_id);
      }
    }
  }
  for (const auto& [id, node] : to_free) store_.Free(id, node);
  for (const auto& [actor, task_id] : finished_actor_calls) Actors().Finished(actor, task_id);
  for (auto& answer : answers) answer();
  RunFollowups(std::move(followups));
  released.clear();  // may call RemoveReference, which takes mutex_
}

void Owner::SetMaxTasksInFlight(std::size_t limit) {
  {
    std::lock_guard lock(mutex_);
    max_tasks_in_flight_ = limit;
  }
  changed_.notify_all();  // a raised limit lets waiting submitters on
}

std::size_t Owner::ResumeBelowLocked() const {
  if (max_tasks_in_flight_ == 0) return 0;
  return max_tasks_in_flight_ - std::max<std::size_t>(1, max_tasks_in_flight_ / 8);
}

void Owner::CountInFlightLocked(PendingTask& task) {
  task.counted = true;
  ++function_tasks_in_flight_;
}

void Owner::UncountInFlightLocked(PendingTask& task) {
  if (!task.counted) return;
  task.counted = false;
  --function_tasks_in_flight_;
  if (submitters_waiting_ > 0 && function_tasks_in_flight_ == ResumeBelowLocked()) {
    changed_.notify_all();
  }
}

void Owner::FailAll(const std::string& reason) {
  std::vector<TaskOutcome> failures;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [task_id, task] : tasks_) {
      failures.push_back(FailedOutcome(task.spec, OutcomeKind::kSystemError, reason));
    }
  }
  for (auto& failure : failures) OnTaskOutcome(std::move(failure));
}

namespace {

// Small objects: built in memory, kept inline in the owner.
class InlineBuilder final : public internal::ObjectBuilder {
 public:
  InlineBuilder(Owner& owner, std::size_t size) : owner_(owner), bytes_(size, '\0') {}
  char* data() override { return bytes_.data(); }
  internal::ObjectId Seal(internal::ContainedRefs contained) override {
    return owner_.AddInlineObject(std::move(bytes_), std::move(contained));
  }

 private:
  Owner& owner_;
  std::string bytes_;
};

// Large objects: built in a shared-memory file of this node's store.
class StoreBuilder final : public internal::ObjectBuilder {
 public:
  StoreBuilder(Owner& owner, StoreAccess& store, internal::ObjectId id, std::uint32_t node,
               std::unique_ptr<object::MappedFile> file)
      : owner_(owner),
        store_(store),
        id_(id),
        node_(node),
        file_(std::move(file)),
        created_(std::chrono::steady_clock::now()) {}
  ~StoreBuilder() override {
    if (file_) store_.Free(id_, node_);  // never sealed
  }
  char* data() override { return reinterpret_cast<char*>(file_->data()); }
  internal::ObjectId Seal(internal::ContainedRefs contained) override {
    const std::uint64_t size = file_->size();
    file_.reset();
    // Its reference may leave this process by any way at once.
    const Status sealed = store_.Seal(id_, size, 0, SealWait::kUntilSealed);
    if (!sealed.ok()) {
      store_.Free(id_, node_);
      throw Error("sray: cannot seal object " + id_.ToString() + " in node " +
                  std::to_string(node_) + "'s store: " + sealed.message() +
                  ": its node manager may have ended; check the job's log");
    }
    if (size >= kLargeTransferBytes && LogEnabled(LogLevel::kDebug)) {
      Log(LogLevel::kDebug,
          "put object " + id_.ToString() + " into node " + std::to_string(node_) + "'s store: " +
              DescribeTransfer(
                  size, std::chrono::duration<double>(std::chrono::steady_clock::now() - created_)
                            .count()));
    }
    return owner_.AddSealedStoreObject(id_, size, std::move(contained));
  }

 private:
  Owner& owner_;
  StoreAccess& store_;
  internal::ObjectId id_;
  std::uint32_t node_;
  std::unique_ptr<object::MappedFile> file_;
  std::chrono::steady_clock::time_point created_;  // the Put's serialization starts here
};

}  // namespace

internal::ObjectId Owner::AddInlineObject(std::string value, internal::ContainedRefs contained) {
  ObjectEntry entry;
  entry.state = State::kReady;
  entry.inline_value = std::move(value);
  if (!contained.empty()) entry.shared().contained = std::move(contained);
  std::lock_guard lock(mutex_);
  const internal::ObjectId id{identity_.rank, next_index_++};
  objects_.emplace(id, std::move(entry));
  return id;
}

internal::ObjectId Owner::AddSealedStoreObject(const internal::ObjectId& id, std::uint64_t size,
                                               internal::ContainedRefs contained) {
  ObjectEntry entry;
  entry.state = State::kReady;
  if (!contained.empty()) entry.shared().contained = std::move(contained);
  entry.in_store = true;
  entry.node = identity_.node_id;
  entry.size = size;
  std::lock_guard lock(mutex_);
  objects_.emplace(id, std::move(entry));
  return id;
}

std::unique_ptr<internal::ObjectBuilder> Owner::CreateObject(std::size_t size) {
  if (size <= store_.inline_limit()) return std::make_unique<InlineBuilder>(*this, size);
  internal::ObjectId id;
  {
    std::lock_guard lock(mutex_);
    id = internal::ObjectId{identity_.rank, next_index_++};
  }
  auto path = store_.Create(id, size, /*incarnation=*/0);
  if (!path.ok()) {
    const std::string message =
        "sray: Put of " + std::to_string(size) + " bytes failed: " + path.status().message();
    if (path.status().code() == StatusCode::kResourceExhausted) throw ObjectStoreFullError(message);
    throw Error(message);
  }
  auto file = object::MappedFile::Create(*path, size);
  if (!file.ok()) {
    store_.Free(id, identity_.node_id);
    throw ObjectStoreFullError("sray: Put of " + std::to_string(size) +
                               " bytes failed: " + file.status().message() +
                               ": free space in /dev/shm or lower object_store_memory");
  }
  return std::make_unique<StoreBuilder>(*this, store_, id, identity_.node_id,
                                        std::move(file).value());
}

void Owner::RemoveReference(const internal::ObjectId& id) noexcept {
  if (!Owns(id)) {
    if (borrowed_) borrowed_->Release(id);
    return;
  }
  std::vector<std::pair<internal::ObjectId, std::uint32_t>> to_free;
  std::vector<std::shared_ptr<internal::ObjectHandle>> released;
  bool compacted = false;
  BlockPool::DetachedChunks empty_chunks;  // unmapped after the lock
  {
    std::lock_guard lock(mutex_);
    auto found = objects_.find(id);
    if (found == objects_.end()) return;
    if (found->second.handles > 0) found->second.handles--;
    ReleaseIfUnusedLocked(id, to_free, released);
    compacted = CompactIfDrainedLocked(empty_chunks);
  }
  for (const auto& [object, node] : to_free) store_.Free(object, node);
  released.clear();  // may call RemoveReference again, without the lock
  if (compacted) ReturnFreedMemoryToTheSystem();
}

void Owner::ReleaseKeptMemory() {
  BlockPool::DetachedChunks empty_chunks;  // unmapped after the lock
  std::lock_guard lock(mutex_);
  empty_chunks = table_pools_.DetachEmptyChunks();
}

bool Owner::CompactIfDrainedLocked(BlockPool::DetachedChunks& empty_chunks) {
  // Hash tables keep their bucket arrays at their largest size: after a
  // million references, megabytes each. Shrunk once they hold a sixteenth
  // of what their buckets were sized for.
  constexpr std::size_t kCompactAbove = 1 << 16;
  // Once the rest of such a drain is gone too, the pools' empty chunks go
  // back once more (without that they would wait for the pools' next use:
  // common/block_pool.h).
  constexpr std::size_t kDrainedBelow = 1024;
  if (release_pools_when_drained_ && objects_.size() < kDrainedBelow) {
    release_pools_when_drained_ = false;
    empty_chunks = table_pools_.DetachEmptyChunks();
    return true;
  }
  if (objects_.bucket_count() <= kCompactAbove || objects_.size() * 16 > objects_.bucket_count()) {
    return false;
  }
  release_pools_when_drained_ = true;
  objects_.rehash(0);
  tasks_.rehash(0);
  lineage_.rehash(0);
  watchers_.rehash(0);
  waiting_.rehash(0);
  empty_chunks = table_pools_.DetachEmptyChunks();
  return true;
}

void Owner::ThrowFailure(const TaskOutcome& failure) const {
  const RemoteOrigin origin{
      .function = failure.function, .node_id = failure.node, .pid = failure.pid};
  switch (static_cast<OutcomeKind>(failure.kind)) {
    case OutcomeKind::kTaskThrew:
      throw TaskError("sray: task " + failure.function + " failed on node " +
                          std::to_string(failure.node) + " (pid " + std::to_string(failure.pid) +
                          "): " + failure.error_type + ": " + failure.error_message,
                      failure.error_type, failure.error_message, origin);
    case OutcomeKind::kWorkerDied:
      throw WorkerDiedError("sray: task " + failure.function + ": " + failure.error_message,
                            origin);
    case OutcomeKind::kInfeasible:
      throw InfeasibleResourcesError("sray: task " + failure.function + ": " +
                                     failure.error_message);
    case OutcomeKind::kActorDied:
    case OutcomeKind::kActorRestarting:
      throw ActorDiedError("sray: actor call " + failure.function + ": " + failure.error_message,
                           failure.error_type, origin);
    case OutcomeKind::kStoreFull:
      throw ObjectStoreFullError("sray: task " + failure.function + ": " + failure.error_message);
    case OutcomeKind::kObjectLost:
      throw ObjectLostError(
          "sray: " +
          (failure.function.empty() ? std::string() : "task " + failure.function + ": ") +
          failure.error_message);
    default: throw Error("sray: task " + failure.function + ": " + failure.error_message);
  }
}

}  // namespace sray::core
