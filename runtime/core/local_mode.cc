#include "core/local_mode.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/actor_calls.h"
#include "core/owner.h"
#include "core/process_runtime.h"
#include "core/task_execution.h"
#include "sched/resources.h"
#include "sray/errors.h"

namespace sray::core {
namespace {

constexpr std::uint32_t kLocalNode = 0;
constexpr std::uint32_t kLocalRank = 0;

std::atomic<bool> local_mode_running{false};
// True on TaskThreads' threads: only they run queued tasks while they wait
// in Get (the driver's Get must keep its timeout, and a task thread that
// waits is what could otherwise starve the queue).
thread_local bool tls_task_thread = false;
// True on every thread local mode runs user code on (tasks and actors).
thread_local bool tls_local_mode_thread = false;

// Every object stays in the owner's memory: nothing reaches a store.
class InMemoryStore final : public StoreAccess {
 public:
  [[nodiscard]] std::size_t inline_limit() const override {
    return std::numeric_limits<std::size_t>::max();
  }
  Result<std::string> Create(const ObjectId& id, std::uint64_t /*size*/,
                             std::int32_t /*incarnation*/) override {
    return NoStore(id);
  }
  Status Seal(const ObjectId& id, std::uint64_t /*size*/, std::int32_t /*incarnation*/,
              SealWait /*wait*/) override {
    return NoStore(id);
  }
  Result<std::string> MakeLocal(const ObjectId& id, std::uint32_t /*holder_node*/,
                                std::uint64_t /*size*/) override {
    return NoStore(id);
  }
  void Free(const ObjectId& /*id*/, std::uint32_t /*holder_node*/) override {}
  void DiscardOrphan(const OrphanedResult& /*orphan*/) override {}

 private:
  static Status NoStore(const ObjectId& id) {
    return Status::Internal("local mode keeps objects in memory, but object " + id.ToString() +
                            " was looked for in a store");
  }
};

// Function tasks: a queue and the threads that run it. A task thread waiting
// in Get runs queued tasks itself meanwhile (RunOne, the owner's helper), so
// tasks waiting for their children cannot hold every thread.
class TaskThreads {
 public:
  TaskThreads(StoreAccess& store, std::size_t count) : store_(store) {
    threads_.reserve(count);
    for (std::size_t index = 0; index < count; ++index) {
      threads_.emplace_back([this] { Serve(); });
    }
  }
  ~TaskThreads() { Stop(); }
  TaskThreads(const TaskThreads&) = delete;
  TaskThreads& operator=(const TaskThreads&) = delete;

  void SetOwner(Owner* owner) { owner_.store(owner); }

  void Submit(TaskSpec spec) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(spec));
    }
    changed_.notify_one();
  }

  bool RunOne() {
    if (!tls_task_thread) return false;
    TaskSpec spec;
    {
      std::lock_guard lock(mutex_);
      if (queue_.empty()) return false;
      spec = std::move(queue_.front());
      queue_.pop_front();
    }
    Run(spec);
    return true;
  }

  void Stop() {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
    }
    changed_.notify_all();
    for (auto& thread : threads_) thread.join();
  }

 private:
  void Serve() {
    tls_task_thread = true;
    tls_local_mode_thread = true;
    while (true) {
      TaskSpec spec;
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (stopping_) return;
        spec = std::move(queue_.front());
        queue_.pop_front();
      }
      Run(spec);
    }
  }

  void Run(const TaskSpec& spec) {
    TaskOutcome outcome = ExecuteTask(spec, store_, kLocalNode);
    outcome.node = kLocalNode;
    if (Owner* owner = owner_.load()) owner->OnTaskOutcome(std::move(outcome));
  }

  StoreAccess& store_;
  std::atomic<Owner*> owner_{nullptr};
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<TaskSpec> queue_;  // guarded by mutex_
  bool stopping_ = false;       // guarded by mutex_
  std::vector<std::thread> threads_;
};

// Actors in this process: each has max_concurrency threads; its calls run
// in the order they were submitted once their arguments are resolved.
class LocalActors final : public ActorCalls {
 public:
  explicit LocalActors(StoreAccess& store) : store_(store) {}
  ~LocalActors() override { Stop(); }
  LocalActors(const LocalActors&) = delete;
  LocalActors& operator=(const LocalActors&) = delete;

  void SetOwner(Owner* owner) { owner_.store(owner); }

  internal::ActorId Create(const std::string& factory,
                           std::vector<internal::TaskArgument> arguments,
                           const internal::ActorOptions& options) override {
    const std::string label = "actor " + factory;
    if (Status valid = sched::ValidateAmounts(options.resources); !valid.ok()) {
      throw ConfigError("sray: " + label + ": " + valid.message());
    }
    if (options.max_concurrency == 0) {
      throw ConfigError("sray: " + label + ": max_concurrency is 0: use 1 or more");
    }
    if (options.max_restarts < 0 || options.max_task_retries < 0) {
      throw ConfigError("sray: " + label + ": max_restarts and max_task_retries must be 0 or more");
    }
    std::unique_lock lock(mutex_);
    if (options.placement_group != 0) {
      auto group = groups_.find(options.placement_group);
      if (group == groups_.end() || group->second.removed) {
        throw ConfigError("sray: " + label + ": placement group " +
                          std::to_string(options.placement_group) +
                          " does not exist or was removed: create it first");
      }
    }
    if (!options.name.empty()) {
      for (const auto& [id, actor] : actors_) {
        if (!actor->dead && actor->name == options.name) {
          throw ConfigError("sray: an actor named '" + options.name +
                            "' already exists in this job: choose another name, or use "
                            "sray::GetActor to reach it");
        }
      }
    }
    const internal::ActorId id = next_actor_++;
    auto actor = std::make_unique<Actor>();
    actor->id = id;
    actor->factory = factory;
    actor->name = options.name;
    actor->max_task_retries = options.max_task_retries;
    actor->restarts_left = options.max_restarts;
    actor->placement_group = options.placement_group;
    actor->constructor_arguments = std::move(arguments);
    actor->needs_construction = true;
    Actor* raw = actor.get();
    actors_.emplace(id, std::move(actor));
    for (std::uint32_t index = 0; index < options.max_concurrency; ++index) {
      raw->threads.emplace_back([this, raw, index] { Serve(*raw, index == 0); });
    }
    return id;
  }

  std::optional<internal::NamedActor> FindNamed(const std::string& name) override {
    std::lock_guard lock(mutex_);
    for (const auto& [id, actor] : actors_) {
      if (!actor->dead && actor->name == name) {
        return internal::NamedActor{.id = id, .max_task_retries = actor->max_task_retries};
      }
    }
    return std::nullopt;
  }

  void Kill(internal::ActorId id, bool no_restart) override {
    std::vector<TaskOutcome> failures;
    {
      std::lock_guard lock(mutex_);
      auto found = actors_.find(id);
      if (found == actors_.end()) return;
      Actor& actor = *found->second;
      if (actor.dead) return;
      if (!no_restart && actor.restarts_left > 0) {
        // As a restarted process would: a new instance before the next call.
        --actor.restarts_left;
        actor.needs_construction = true;
      } else {
        MarkDeadLocked(actor, "it was killed by ActorHandle::Kill()", failures);
      }
    }
    changed_.notify_all();
    Deliver(std::move(failures));
  }

  std::uint64_t CreatePlacementGroup(const std::string& name,
                                     const std::vector<std::map<std::string, double>>& bundles,
                                     PlacementStrategy strategy) override {
    const std::string label = "placement group" + (name.empty() ? std::string() : " " + name);
    if (bundles.empty())
      throw ConfigError("sray: " + label + " has no bundles: give it one or more");
    if (static_cast<std::uint8_t>(strategy) >
        static_cast<std::uint8_t>(PlacementStrategy::kStrictSpread)) {
      throw ConfigError("sray: " + label + ": unknown placement strategy");
    }
    for (const auto& bundle : bundles) {
      if (Status valid = sched::ValidateAmounts(bundle); !valid.ok()) {
        throw ConfigError("sray: " + label + " bundle: " + valid.message());
      }
    }
    if (strategy == PlacementStrategy::kStrictSpread && bundles.size() > 1) {
      throw InfeasibleResourcesError(
          "sray: " + label + " asks STRICT_SPREAD over " + std::to_string(bundles.size()) +
          " bundles, but local mode has one node: use PACK or SPREAD, or run the program under "
          "sray run / srun --ray-cluster");
    }
    std::lock_guard lock(mutex_);
    const std::uint64_t id = next_group_++;
    groups_[id] = Group{.bundles = bundles.size(), .removed = false};
    return id;
  }

  internal::PlacementGroupState WaitPlacementGroup(std::uint64_t id,
                                                   internal::Timeout /*timeout*/) override {
    std::lock_guard lock(mutex_);
    auto found = groups_.find(id);
    if (found == groups_.end()) {
      throw Error("sray: placement group " + std::to_string(id) + " does not exist in this job");
    }
    internal::PlacementGroupState state;
    state.removed = found->second.removed;
    state.placed = !state.removed;
    if (state.placed) state.bundle_nodes.assign(found->second.bundles, kLocalNode);
    return state;
  }

  void RemovePlacementGroup(std::uint64_t id) override {
    std::vector<TaskOutcome> failures;
    {
      std::lock_guard lock(mutex_);
      auto found = groups_.find(id);
      if (found == groups_.end() || found->second.removed) return;
      found->second.removed = true;
      for (auto& [actor_id, actor] : actors_) {
        if (actor->placement_group == id && !actor->dead) {
          MarkDeadLocked(*actor, "its placement group was removed", failures);
        }
      }
    }
    changed_.notify_all();
    Deliver(std::move(failures));
  }

  void Enqueue(internal::ActorId id, std::uint64_t task_id) override {
    std::lock_guard lock(mutex_);
    auto found = actors_.find(id);
    if (found != actors_.end()) found->second->submitted.push_back(task_id);
  }

  void Send(TaskSpec spec) override {
    std::vector<TaskOutcome> failures;
    {
      std::lock_guard lock(mutex_);
      auto found = actors_.find(spec.actor_id);
      if (found == actors_.end()) {
        failures.push_back(FailedOutcome(
            spec, OutcomeKind::kActorDied,
            "actor " + std::to_string(spec.actor_id) + " does not exist in this process"));
      } else if (found->second->dead) {
        failures.push_back(DeadOutcome(*found->second, spec));
      } else {
        Actor& actor = *found->second;
        const auto position =
            std::find(actor.submitted.begin(), actor.submitted.end(), spec.task_id);
        if (position == actor.submitted.end()) {
          actor.runnable.push_back(std::move(spec));  // a retry: its turn came before
        } else {
          actor.resolved.emplace(spec.task_id, std::move(spec));
          ReleaseInOrderLocked(actor);
        }
      }
    }
    changed_.notify_all();
    Deliver(std::move(failures));
  }

  // A call that failed before it was sent (an argument failed) never
  // reaches Send: its place in the order is given up here, or every call
  // after it would wait for it.
  void Finished(internal::ActorId id, std::uint64_t task_id) override {
    {
      std::lock_guard lock(mutex_);
      auto found = actors_.find(id);
      if (found == actors_.end()) return;
      Actor& actor = *found->second;
      const auto position = std::find(actor.submitted.begin(), actor.submitted.end(), task_id);
      if (position == actor.submitted.end()) return;
      actor.submitted.erase(position);
      actor.resolved.erase(task_id);
      ReleaseInOrderLocked(actor);
    }
    changed_.notify_all();
  }

  void Stop() {
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      for (auto& [id, actor] : actors_) {
        for (auto& thread : actor->threads) threads.push_back(std::move(thread));
        actor->threads.clear();
      }
    }
    changed_.notify_all();
    for (auto& thread : threads) {
      if (thread.joinable()) thread.join();
    }
    std::lock_guard lock(mutex_);
    actors_.clear();  // instances end here, on the thread that shuts down
  }

 private:
  struct Actor {
    internal::ActorId id = 0;
    std::string factory;
    std::string name;
    int max_task_retries = 0;
    int restarts_left = 0;
    std::uint64_t placement_group = 0;
    std::vector<internal::TaskArgument> constructor_arguments;
    std::int32_t incarnation = -1;
    bool needs_construction = false;
    bool constructing = false;
    bool dead = false;
    std::string cause;
    internal::ActorInstance instance;
    std::deque<std::uint64_t> submitted;         // task ids in submission order
    std::map<std::uint64_t, TaskSpec> resolved;  // sent, waiting for their turn
    std::deque<TaskSpec> runnable;               // their turn came
    std::vector<std::thread> threads;
  };
  struct Group {
    std::size_t bundles = 0;
    bool removed = false;
  };

  [[nodiscard]] static std::string Label(const Actor& actor) {
    return actor.name.empty()
               ? "anonymous actor " + std::to_string(actor.id) + " (" + actor.factory + ")"
               : "actor '" + actor.name + "'";
  }

  static TaskOutcome DeadOutcome(const Actor& actor, const TaskSpec& spec) {
    TaskOutcome outcome =
        FailedOutcome(spec, OutcomeKind::kActorDied, Label(actor) + " is dead: " + actor.cause);
    outcome.error_type = Label(actor);
    outcome.node = kLocalNode;
    return outcome;
  }

  void MarkDeadLocked(Actor& actor, std::string cause, std::vector<TaskOutcome>& failures) {
    actor.dead = true;
    actor.cause = std::move(cause);
    for (const auto& spec : actor.runnable) failures.push_back(DeadOutcome(actor, spec));
    for (const auto& [task_id, spec] : actor.resolved) failures.push_back(DeadOutcome(actor, spec));
    actor.runnable.clear();
    actor.resolved.clear();
    actor.submitted.clear();
  }

  // Calls run in submission order: those whose turn has come go.
  static void ReleaseInOrderLocked(Actor& actor) {
    while (!actor.submitted.empty()) {
      auto ready = actor.resolved.find(actor.submitted.front());
      if (ready == actor.resolved.end()) break;
      actor.runnable.push_back(std::move(ready->second));
      actor.resolved.erase(ready);
      actor.submitted.pop_front();
    }
  }

  void Deliver(std::vector<TaskOutcome> outcomes) {
    Owner* owner = owner_.load();
    if (owner == nullptr) return;
    for (auto& outcome : outcomes) owner->OnTaskOutcome(std::move(outcome));
  }

  // One of the actor's threads; the first one also (re)builds the instance.
  void Serve(Actor& actor, bool builds) {
    tls_local_mode_thread = true;
    while (true) {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] {
        if (stopping_ || actor.dead) return true;
        if (builds && actor.needs_construction && !actor.constructing) return true;
        return !actor.needs_construction && !actor.constructing && !actor.runnable.empty();
      });
      if (stopping_ || actor.dead) return;
      if (builds && actor.needs_construction) {
        actor.needs_construction = false;
        actor.constructing = true;
        ++actor.incarnation;
        lock.unlock();
        Construct(actor);
        continue;
      }
      TaskSpec call = std::move(actor.runnable.front());
      actor.runnable.pop_front();
      const internal::ActorInstance instance = actor.instance;
      call.incarnation = actor.incarnation;
      lock.unlock();
      TaskOutcome outcome = ExecuteActorCall(call, store_, kLocalNode, instance);
      outcome.node = kLocalNode;
      Deliver({std::move(outcome)});
    }
  }

  void Construct(Actor& actor) {
    TaskSpec spec;
    spec.function = actor.factory;
    spec.name = actor.name.empty() ? actor.factory : actor.name;
    spec.kind = TaskKind::kActorCreation;
    spec.actor_id = actor.id;
    spec.owner_rank = kLocalRank;
    spec.owner_node = kLocalNode;
    std::string failure;
    // ObjectRef arguments are resolved here, on the actor's thread, so that
    // Create returns at once as it does in a job.
    for (const auto& argument : actor.constructor_arguments) {
      ArgumentSpec resolved;
      if (!argument.reference) {
        resolved.value = argument.value;
      } else if (Owner* owner = owner_.load()) {
        try {
          const auto values = owner->Get({argument.reference->id()}, std::nullopt);
          resolved.value = std::string(values.front()->bytes());
        } catch (const std::exception& error) {
          failure = std::string("an argument of its constructor failed: ") + error.what();
          break;
        }
      }
      spec.arguments.push_back(std::move(resolved));
    }
    internal::ActorInstance instance;
    if (failure.empty()) {
      const TaskOutcome outcome = ConstructActor(spec, store_, kLocalNode, instance);
      const auto kind = static_cast<OutcomeKind>(outcome.kind);
      if (kind != OutcomeKind::kInlineValue && kind != OutcomeKind::kStoredValue) {
        failure = "its constructor " + actor.factory + " failed: " +
                  (outcome.error_type.empty() ? std::string() : outcome.error_type + ": ") +
                  outcome.error_message;
      }
    }
    std::vector<TaskOutcome> failures;
    {
      std::lock_guard lock(mutex_);
      actor.constructing = false;
      if (!failure.empty()) {
        MarkDeadLocked(actor, failure, failures);
      } else {
        actor.instance = std::move(instance);
      }
    }
    changed_.notify_all();
    Deliver(std::move(failures));
  }

  StoreAccess& store_;
  std::atomic<Owner*> owner_{nullptr};
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<internal::ActorId, std::unique_ptr<Actor>> actors_;  // guarded by mutex_
  std::map<std::uint64_t, Group> groups_;                       // guarded by mutex_
  internal::ActorId next_actor_ = 1;                            // guarded by mutex_
  std::uint64_t next_group_ = 1;                                // guarded by mutex_
  bool stopping_ = false;                                       // guarded by mutex_
};

}  // namespace

// Destroyed in reverse: the threads that call the owner end first.
struct LocalMode::Parts {
  InMemoryStore store;
  std::unique_ptr<Owner> owner;
  std::unique_ptr<LocalActors> actors;
  std::unique_ptr<TaskThreads> tasks;
};

std::unique_ptr<LocalMode> LocalMode::Start() {
  auto parts = std::make_unique<Parts>();
  const std::size_t threads = std::max<std::size_t>(2, std::thread::hardware_concurrency());
  parts->tasks = std::make_unique<TaskThreads>(parts->store, threads);
  parts->actors = std::make_unique<LocalActors>(parts->store);
  TaskThreads* tasks = parts->tasks.get();
  parts->owner = std::make_unique<Owner>(
      OwnerIdentity{.rank = kLocalRank, .node_id = kLocalNode}, parts->store,
      [tasks](TaskSpec spec) { tasks->Submit(std::move(spec)); });
  parts->owner->SetActorCalls(parts->actors.get());
  parts->owner->SetHelper([tasks] { return tasks->RunOne(); });
  parts->tasks->SetOwner(parts->owner.get());
  parts->actors->SetOwner(parts->owner.get());
  SetProcessRuntime(parts->owner.get());
  local_mode_running.store(true);
  return std::unique_ptr<LocalMode>(new LocalMode(std::move(parts)));
}

LocalMode::LocalMode(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

LocalMode::~LocalMode() {
  SetProcessRuntime(nullptr);
  local_mode_running.store(false);
  // Wakes whatever waits in Get for a result that will not come now, so the
  // threads below can end.
  parts_->owner->FailAll("sray::Shutdown ended local mode before it finished");
  parts_->actors->Stop();
  parts_->tasks->Stop();
  parts_->owner->SetActorCalls(nullptr);
}

bool LocalModeRequested() {
  const char* value = std::getenv("SRAY_LOCAL_MODE");
  if (value == nullptr) return false;
  const std::string_view text(value);
  return text == "1" || text == "true" || text == "yes" || text == "on";
}

bool InLocalMode() {
  return local_mode_running.load();
}

bool OnLocalModeThread() {
  return tls_local_mode_thread;
}

}  // namespace sray::core
