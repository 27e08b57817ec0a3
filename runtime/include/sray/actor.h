#pragma once

// Actors: a class instance living in its own worker process, called through
// a handle, after Ray's C++ API.
//
//   class Counter {
//    public:
//     static Counter* Create(int start) { return new Counter(start); }
//     int Add(int amount) { return value_ += amount; }
//     ...
//   };
//   SRAY_REMOTE(Counter::Create, &Counter::Add);
//
//   auto counter = sray::Actor(Counter::Create).SetName("counter").Remote(10);
//   int value = sray::Get(counter.Task(&Counter::Add).Remote(5));  // 15
//
// Calls from one caller run in the order they were submitted (one at a time,
// unless SetMaxConcurrency allows more). Handles are values: copy them, pass
// them to tasks and to other actors, or find a named actor with GetActor from
// any process of the job. An actor lives until Kill or the end of the job.
//
// Thread-safety: handles and callers may be used from any thread.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "sray/internal/arguments.h"
#include "sray/internal/function_registry.h"
#include "sray/internal/runtime.h"
#include "sray/object_ref.h"
#include "sray/placement_group.h"

namespace sray {

template <typename Class, typename Method, typename Result, typename... Parameters>
class ActorTaskCaller {
 public:
  ActorTaskCaller(internal::ActorId actor, int max_task_retries, Method method)
      : actor_(actor), max_task_retries_(max_task_retries), method_(method) {}

  // A name for messages; default: the method's registered name.
  ActorTaskCaller& SetName(std::string name) {
    name_ = std::move(name);
    return *this;
  }

  template <typename... Arguments>
  ObjectRef<Result> Remote(Arguments&&... arguments) {
    static_assert(!std::is_void_v<Result>, "sray: an actor method called remotely must return a value");
    auto packed = internal::PackArguments<Parameters...>(std::forward<Arguments>(arguments)...);
    // A named key: GCC 13 takes a reference returned for a temporary
    // argument as dangling (-Wdangling-reference); the name lives in the registry.
    const auto key = internal::KeyOf(method_);
    const std::string& method = internal::FunctionName(key);
    const internal::ObjectId id = internal::CurrentRuntime().SubmitActorTask(
        actor_, max_task_retries_, method, std::move(packed), name_);
    return ObjectRef<Result>(internal::NewObjectHandle(id));
  }

 private:
  internal::ActorId actor_;
  int max_task_retries_;
  Method method_;
  std::string name_;
};

template <typename Class>
class ActorHandle {
 public:
  ActorHandle() = default;
  ActorHandle(internal::ActorId id, int max_task_retries)
      : id_(id), max_task_retries_(max_task_retries) {}

  template <typename Result, typename... Parameters>
  ActorTaskCaller<Class, Result (Class::*)(Parameters...), Result, Parameters...> Task(
      Result (Class::*method)(Parameters...)) const {
    return {CheckedId(), max_task_retries_, method};
  }
  template <typename Result, typename... Parameters>
  ActorTaskCaller<Class, Result (Class::*)(Parameters...) const, Result, Parameters...> Task(
      Result (Class::*method)(Parameters...) const) const {
    return {CheckedId(), max_task_retries_, method};
  }

  // Ends the actor at once and frees its resources; calls not yet run fail
  // with ActorDiedError. With no_restart=false it is restarted if its
  // max_restarts allow. When no call of it runs, its destructor runs (at
  // most one second) and its process serves later actors and tasks of the
  // node; while a call runs, or when it holds a GPU or left threads or
  // memory behind, its process is killed instead, destructor unrun.
  void Kill(bool no_restart = true) const {
    internal::CurrentRuntime().KillActor(CheckedId(), no_restart);
  }

  [[nodiscard]] internal::ActorId id() const { return id_; }
  [[nodiscard]] bool valid() const { return id_ != 0; }

  MSGPACK_DEFINE(id_, max_task_retries_)

 private:
  [[nodiscard]] internal::ActorId CheckedId() const {
    if (id_ == 0) throw Error("sray: this ActorHandle is empty: make it with sray::Actor(...).Remote()");
    return id_;
  }

  internal::ActorId id_ = 0;
  int max_task_retries_ = 0;
};

template <typename Class, typename... Parameters>
class ActorCreator {
 public:
  using Factory = Class* (*)(Parameters...);
  explicit ActorCreator(Factory factory) : factory_(factory) {}

  // A job-wide name for GetActor; taken names are refused.
  ActorCreator& SetName(std::string name) {
    options_.name = std::move(name);
    return *this;
  }
  // Restarts after its process died (constructor re-run; default 0).
  ActorCreator& SetMaxRestarts(int restarts) {
    options_.max_restarts = restarts;
    return *this;
  }
  // Retries of a call lost with the actor's process (default 0).
  ActorCreator& SetMaxTaskRetries(int retries) {
    options_.max_task_retries = retries;
    return *this;
  }
  // Held on one node for the actor's lifetime; default none.
  ActorCreator& SetResources(std::map<std::string, double> resources) {
    options_.resources = std::move(resources);
    return *this;
  }
  // Calls served at once (threads); order holds only with 1, the default.
  ActorCreator& SetMaxConcurrency(std::uint32_t calls) {
    options_.max_concurrency = calls;
    return *this;
  }
  // Places the actor in a bundle of the group (-1: the first that fits).
  ActorCreator& SetPlacementGroup(const PlacementGroup& group, int bundle_index = -1) {
    options_.placement_group = group.id();
    options_.bundle_index = bundle_index;
    return *this;
  }

  template <typename... Arguments>
  ActorHandle<Class> Remote(Arguments&&... arguments) {
    auto packed = internal::PackArguments<Parameters...>(std::forward<Arguments>(arguments)...);
    const auto key = internal::KeyOf(factory_);
    const std::string& factory = internal::FunctionName(key);
    const internal::ActorId id =
        internal::CurrentRuntime().CreateActor(factory, std::move(packed), options_);
    return ActorHandle<Class>(id, options_.max_task_retries);
  }

 private:
  Factory factory_;
  internal::ActorOptions options_;
};

template <typename Class, typename... Parameters>
ActorCreator<Class, Parameters...> Actor(Class* (*factory)(Parameters...)) {
  return ActorCreator<Class, Parameters...>(factory);
}

// The live actor of that name, from any process of the job; empty when there
// is none (never created, killed, or dead for good).
template <typename Class>
std::optional<ActorHandle<Class>> GetActor(const std::string& name) {
  auto found = internal::CurrentRuntime().FindNamedActor(name);
  if (!found) return std::nullopt;
  return ActorHandle<Class>(found->id, found->max_task_retries);
}

}  // namespace sray
