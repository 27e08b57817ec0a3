#include "core/owner.h"

#include <algorithm>
#include <cstring>

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

std::string GetTimeoutMessage(std::chrono::milliseconds timeout, const internal::ObjectId& id,
                              const std::string& producer) {
  return "sray: Get timed out after " + std::to_string(timeout.count()) + " ms: object " +
         id.ToString() + " (result of task " + producer +
         ") is not ready yet: wait longer, or check with Wait first";
}

class InlineValue final : public internal::ObjectValue {
 public:
  explicit InlineValue(std::string bytes) : bytes_(std::move(bytes)) {}
  [[nodiscard]] std::string_view bytes() const override { return bytes_; }

 private:
  std::string bytes_;
};

// Reads straight from the node's shared memory: the zero-copy same-node Get.
class MappedValue final : public internal::ObjectValue {
 public:
  explicit MappedValue(std::unique_ptr<object::MappedFile> file) : file_(std::move(file)) {}
  [[nodiscard]] std::string_view bytes() const override { return file_->view(); }

 private:
  std::unique_ptr<object::MappedFile> file_;
};

std::string TaskLabel(const TaskSpec& spec) {
  return spec.name.empty() ? spec.function : spec.name;
}

}  // namespace

Owner::Owner(OwnerIdentity identity, StoreAccess& store, std::function<void(TaskSpec)> submit)
    : identity_(identity), store_(store), submit_(std::move(submit)) {}

Owner::~Owner() = default;

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

Owner::WatchScope::WatchScope(Owner& owner, const std::vector<internal::ObjectId>& ids,
                              Waiter& waiter)
    : owner_(owner), ids_(ids), waiter_(waiter) {
  for (const auto& id : ids_) {
    auto found = owner_.objects_.find(id);
    if (found == owner_.objects_.end() || found->second.state != State::kPending) continue;
    owner_.watchers_[id].push_back(&waiter_);
    ++waiter_.completions_needed;
  }
}

Owner::WatchScope::~WatchScope() {
  for (const auto& id : ids_) {
    auto found = owner_.watchers_.find(id);
    if (found == owner_.watchers_.end()) continue;
    auto& waiters = found->second;
    std::erase(waiters, &waiter_);
    if (waiters.empty()) owner_.watchers_.erase(found);
  }
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

template <typename Done>
bool Owner::WaitHelping(std::unique_lock<std::mutex>& lock,
                        std::chrono::steady_clock::time_point deadline, BlockedScope& blocked,
                        Done done) {
  while (!done()) {
    if (helper_) {
      lock.unlock();
      const bool ran = helper_();
      lock.lock();
      // Whatever completed while the lock was released notified nobody.
      if (ran || done()) continue;
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
    blocked.Announce();
    // A task arriving for the helper wakes this too (WakeWaiters).
    changed_.wait_until(lock, deadline);
  }
  return true;
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
  std::vector<TaskSpec> to_send;
  std::vector<TaskOutcome> to_fail;
  internal::ObjectId id;
  {
    std::lock_guard lock(mutex_);
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
    entry.producer = TaskLabel(task.spec);
    objects_.emplace(id, std::move(entry));
    auto [inserted, unused] = tasks_.emplace(task_id, std::move(task));
    ResolveArgumentsLocked(inserted->second, to_send, to_fail);
  }
  for (auto& ready : to_send) SendTask(std::move(ready));
  for (auto& failure : to_fail) OnTaskOutcome(std::move(failure));
  return id;
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

void Owner::ResolveArgumentsLocked(PendingTask& task, std::vector<TaskSpec>& to_send,
                                   std::vector<TaskOutcome>& to_fail) {
  task.unresolved = 0;
  for (auto& argument : task.spec.arguments) {
    // Resolved references carry a node and size, or became inline values.
    if (!argument.by_reference || argument.size != 0 || argument.node != 0) continue;
    auto found = objects_.find(argument.id);
    if (found == objects_.end()) {
      to_fail.push_back(FailedOutcome(task.spec, OutcomeKind::kSystemError,
                                      "argument object " + argument.id.ToString() +
                                          " is not owned by this process: pass ObjectRefs only "
                                          "from the process that created them"));
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
    to_send.push_back(task.spec);
  }
}

void Owner::ReleaseIfUnusedLocked(
    const internal::ObjectId& id,
    std::vector<std::pair<internal::ObjectId, std::uint32_t>>& to_free,
    std::vector<std::shared_ptr<internal::ObjectHandle>>& released) {
  auto found = objects_.find(id);
  if (found == objects_.end()) return;
  const ObjectEntry& entry = found->second;
  if (entry.referenced || entry.task_uses > 0 || entry.state == State::kPending) return;
  if (entry.in_store) to_free.emplace_back(id, entry.node);
  objects_.erase(found);
  auto lineage = lineage_.find(id);
  if (lineage != lineage_.end()) {
    for (auto& handle : lineage->second.argument_handles) released.push_back(std::move(handle));
    lineage_.erase(lineage);
  }
}

bool Owner::Reconstruct(const internal::ObjectId& id, std::uint32_t lost_on_node) {
  TaskSpec spec;
  {
    std::lock_guard lock(mutex_);
    auto entry = objects_.find(id);
    auto lineage = lineage_.find(id);
    if (entry == objects_.end() || lineage == lineage_.end()) return false;
    PendingTask& task = lineage->second;
    if (task.spec.attempt >= task.max_retries) return false;
    // Someone else already started it again.
    if (entry->second.state == State::kPending) return true;
    PrepareRetry(task.spec);
    task.sent = true;
    for (const auto& argument : task.spec.arguments) {
      auto used = objects_.find(argument.id);
      if (used != objects_.end()) used->second.task_uses++;
    }
    entry->second.state = State::kPending;
    entry->second.in_store = false;
    spec = task.spec;
    tasks_.emplace(task.spec.task_id, std::move(task));
    lineage_.erase(lineage);
  }
  store_.Free(id, lost_on_node);  // the stale record of the lost copy
  SendTask(std::move(spec));
  return true;
}

void Owner::OnTaskOutcome(TaskOutcome outcome) {
  std::vector<TaskSpec> to_send;
  std::vector<TaskOutcome> to_fail;
  std::vector<std::pair<internal::ObjectId, std::uint32_t>> to_free;
  std::vector<std::shared_ptr<internal::ObjectHandle>> released;
  std::vector<std::pair<internal::ActorId, std::uint64_t>> finished_actor_calls;
  const auto kind = static_cast<OutcomeKind>(outcome.kind);
  {
    std::lock_guard lock(mutex_);
    auto found = tasks_.find(outcome.task_id);
    if (found == tasks_.end() || found->second.spec.return_id != outcome.return_id) {
      // A late duplicate (the task was retried elsewhere): drop its value.
      if (kind == OutcomeKind::kStoredValue) to_free.emplace_back(outcome.return_id, outcome.node);
    } else {
      PendingTask& task = found->second;
      const bool retry =
          task.spec.attempt < task.max_retries &&
          (kind == OutcomeKind::kWorkerDied || kind == OutcomeKind::kActorRestarting ||
           (kind == OutcomeKind::kTaskThrew && task.retry_exceptions));
      if (retry) {
        PrepareRetry(task.spec);
        to_send.push_back(task.spec);
      } else {
        ObjectEntry& entry = objects_[outcome.return_id];
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
            if (outcome.function.empty()) outcome.function = TaskLabel(task.spec);
            outcome.error_message += kind == OutcomeKind::kWorkerDied
                                         ? " (attempts: " + std::to_string(task.spec.attempt + 1) +
                                               ", max_retries=" + std::to_string(task.max_retries) +
                                               ")"
                                         : "";
            entry.failure = std::make_shared<const TaskOutcome>(outcome);
            break;
        }
        for (const auto& argument : task.spec.arguments) {
          auto used = objects_.find(argument.id);
          if (used != objects_.end() && used->second.task_uses > 0) {
            used->second.task_uses--;
            ReleaseIfUnusedLocked(argument.id, to_free, released);
          }
        }
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
              ResolveArgumentsLocked(task_entry->second, to_send, to_fail);
            }
          }
        }
        NotifyCompletionLocked(outcome.return_id);
      }
    }
  }
  for (const auto& [id, node] : to_free) store_.Free(id, node);
  for (const auto& [actor, task_id] : finished_actor_calls) Actors().Finished(actor, task_id);
  for (auto& spec : to_send) SendTask(std::move(spec));
  for (auto& failure : to_fail) OnTaskOutcome(std::move(failure));
  released.clear();  // may call RemoveReference, which takes mutex_
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
  internal::ObjectId Seal() override { return owner_.AddInlineObject(std::move(bytes_)); }

 private:
  Owner& owner_;
  std::string bytes_;
};

// Large objects: built in a shared-memory file of this node's store.
class StoreBuilder final : public internal::ObjectBuilder {
 public:
  StoreBuilder(Owner& owner, StoreAccess& store, internal::ObjectId id, std::uint32_t node,
               std::unique_ptr<object::MappedFile> file)
      : owner_(owner), store_(store), id_(id), node_(node), file_(std::move(file)) {}
  ~StoreBuilder() override {
    if (file_) store_.Free(id_, node_);  // never sealed
  }
  char* data() override { return reinterpret_cast<char*>(file_->data()); }
  internal::ObjectId Seal() override {
    const std::uint64_t size = file_->size();
    file_.reset();
    store_.Seal(id_, size);
    return owner_.AddSealedStoreObject(id_, size);
  }

 private:
  Owner& owner_;
  StoreAccess& store_;
  internal::ObjectId id_;
  std::uint32_t node_;
  std::unique_ptr<object::MappedFile> file_;
};

}  // namespace

internal::ObjectId Owner::AddInlineObject(std::string value) {
  ObjectEntry entry;
  entry.state = State::kReady;
  entry.inline_value = std::move(value);
  std::lock_guard lock(mutex_);
  const internal::ObjectId id{identity_.rank, next_index_++};
  objects_.emplace(id, std::move(entry));
  return id;
}

internal::ObjectId Owner::AddSealedStoreObject(const internal::ObjectId& id, std::uint64_t size) {
  ObjectEntry entry;
  entry.state = State::kReady;
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
  auto path = store_.Create(id, size);
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

std::vector<std::shared_ptr<const internal::ObjectValue>> Owner::Get(
    const std::vector<internal::ObjectId>& ids, internal::Timeout timeout) {
  const auto deadline = timeout ? std::chrono::steady_clock::now() + *timeout
                                : std::chrono::steady_clock::time_point::max();
  std::vector<std::shared_ptr<const internal::ObjectValue>> values;
  values.reserve(ids.size());
  BlockedScope blocked(blocking_notifier_);
  {
    // First until none is pending, with one wake-up for all of them; then
    // each is read in order below (that loop also recomputes lost ones).
    std::unique_lock lock(mutex_);
    Waiter waiter;
    WatchScope watch(*this, ids, waiter);
    if (!WaitHelping(lock, deadline, blocked, [&] { return waiter.completions_needed == 0; })) {
      for (const auto& id : ids) {
        auto found = objects_.find(id);
        if (found == objects_.end() || found->second.state != State::kPending) continue;
        throw GetTimeoutError(GetTimeoutMessage(*timeout, id, found->second.producer));
      }
    }
  }
  for (const auto& id : ids) {
    while (true) {
      std::unique_lock lock(mutex_);
      const std::vector<internal::ObjectId> this_one{id};
      Waiter waiter;
      WatchScope watch(*this, this_one, waiter);
      if (!WaitHelping(lock, deadline, blocked, [&] { return waiter.completions_needed == 0; })) {
        const auto& entry = objects_.at(id);
        throw GetTimeoutError(GetTimeoutMessage(*timeout, id, entry.producer));
      }
      auto found = objects_.find(id);
      if (found == objects_.end()) {
        throw ObjectLostError("sray: object " + id.ToString() +
                              " is unknown to this process: its references were all dropped, or "
                              "it belongs to another process");
      }
      const ObjectEntry& entry = found->second;
      if (entry.state == State::kFailed) {
        const std::shared_ptr<const TaskOutcome> failure = entry.failure;
        lock.unlock();
        ThrowFailure(*failure);
      }
      if (!entry.in_store) {
        values.push_back(std::make_shared<InlineValue>(entry.inline_value));
        break;
      }
      const std::uint32_t node = entry.node;
      const std::uint64_t size = entry.size;
      const std::string producer = entry.producer;
      lock.unlock();
      auto value = ReadStored(id, node, size);
      if (value) {
        values.push_back(std::move(value));
        break;
      }
      if (!Reconstruct(id, node)) {
        throw ObjectLostError(
            "sray: object " + id.ToString() + " is lost: node " + std::to_string(node) +
            " no longer has it, and it cannot be " + "recomputed (" +
            (producer.empty()
                 ? std::string("it was Put, not computed by a task): keep a "
                               "copy of data you Put, or Put it again")
                 : "task " + producer + " has no retries left): raise its SetMaxRetries"));
      }
    }
  }
  return values;
}

std::shared_ptr<const internal::ObjectValue> Owner::ReadStored(const internal::ObjectId& id,
                                                               std::uint32_t node,
                                                               std::uint64_t size) {
  Status last = Status::Ok();
  // The store may spill the object between MakeLocal and the open; ask again.
  for (int attempt = 0; attempt < 5; ++attempt) {
    auto path = store_.MakeLocal(id, node, size);
    if (!path.ok()) {
      last = path.status();
      break;
    }
    auto file = object::MappedFile::OpenReadOnly(*path);
    if (file.ok()) return std::make_shared<MappedValue>(std::move(file).value());
    last = file.status();
  }
  if (last.code() == StatusCode::kNotFound) return nullptr;
  const std::string message = "sray: cannot read object " + id.ToString() + " of node " +
                              std::to_string(node) + ": " + last.message();
  if (last.code() == StatusCode::kResourceExhausted) throw ObjectStoreFullError(message);
  throw Error(message);
}

std::vector<bool> Owner::Wait(const std::vector<internal::ObjectId>& ids, std::size_t num_ready,
                              internal::Timeout timeout) {
  const auto deadline = timeout ? std::chrono::steady_clock::now() + *timeout
                                : std::chrono::steady_clock::time_point::max();
  const std::size_t wanted = std::min(num_ready, ids.size());
  std::vector<bool> ready(ids.size(), false);
  BlockedScope blocked(blocking_notifier_);
  std::unique_lock lock(mutex_);
  while (true) {
    std::size_t count = 0;
    for (std::size_t index = 0; index < ids.size(); ++index) {
      auto found = objects_.find(ids[index]);
      ready[index] = found == objects_.end() || found->second.state != State::kPending;
      if (ready[index]) ++count;
    }
    if (count >= wanted) return ready;
    Waiter waiter;
    WatchScope watch(*this, ids, waiter);
    waiter.completions_needed = wanted - count;
    if (!WaitHelping(lock, deadline, blocked, [&] { return waiter.completions_needed == 0; })) {
      for (std::size_t index = 0; index < ids.size(); ++index) {
        auto found = objects_.find(ids[index]);
        ready[index] = found == objects_.end() || found->second.state != State::kPending;
      }
      return ready;
    }
  }
}

void Owner::RemoveReference(const internal::ObjectId& id) noexcept {
  std::vector<std::pair<internal::ObjectId, std::uint32_t>> to_free;
  std::vector<std::shared_ptr<internal::ObjectHandle>> released;
  {
    std::lock_guard lock(mutex_);
    auto found = objects_.find(id);
    if (found == objects_.end()) return;
    found->second.referenced = false;
    ReleaseIfUnusedLocked(id, to_free, released);
  }
  for (const auto& [object, node] : to_free) store_.Free(object, node);
  released.clear();  // may call RemoveReference again, without the lock
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
    default: throw Error("sray: task " + failure.function + ": " + failure.error_message);
  }
}

}  // namespace sray::core
