#pragma once

// sray::Task(function).SetResources(...).Remote(args...) -> ObjectRef<R>.

#include <cstddef>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "sray/errors.h"
#include "sray/internal/arguments.h"
#include "sray/internal/function_registry.h"
#include "sray/internal/runtime.h"
#include "sray/object_ref.h"

namespace sray {

template <typename Function>
class TaskCaller;

template <typename Result, typename... Parameters>
class TaskCaller<Result (*)(Parameters...)> {
 public:
  using FunctionPointer = Result (*)(Parameters...);
  explicit TaskCaller(FunctionPointer function) : function_(function) {}

  // e.g. {{"CPU", 2}, {"GPU", 0.5}, {"ssd", 1}}; default {"CPU": 1}.
  TaskCaller& SetResources(std::map<std::string, double> resources) {
    options_.resources = std::move(resources);
    return *this;
  }
  // Retries after the worker died (default 3; 0 disables). A negative count
  // (Ray's -1, "for ever") throws ConfigError, as actors' max_restarts does:
  // it used to mean no retry at all, without a word.
  TaskCaller& SetMaxRetries(int retries) {
    if (retries < 0) {
      throw ConfigError(
          "sray: SetMaxRetries(" + std::to_string(retries) +
          "): a task's retries must be 0 or more; sray has no unlimited retries (a task "
          "that kills its worker every time would run for ever): give a count");
    }
    options_.max_retries = retries;
    return *this;
  }
  // Also retry when the task throws (default: an exception is final).
  TaskCaller& SetRetryExceptions(bool retry) {
    options_.retry_exceptions = retry;
    return *this;
  }
  TaskCaller& SetName(std::string name) {
    options_.name = std::move(name);
    return *this;
  }

  // Returns at once, unless this process already has max_tasks_in_flight
  // tasks unfinished (an option, 100,000 by default): then it waits until
  // some finish, lending its CPUs meanwhile when called inside a task.
  template <typename... Arguments>
  ObjectRef<Result> Remote(Arguments&&... arguments) {
    static_assert(!std::is_void_v<Result>, "sray: a remote function must return a value");
    auto packed = internal::PackArguments<Parameters...>(std::forward<Arguments>(arguments)...);
    const auto key = internal::KeyOf(function_);  // named: see ActorTaskCaller::Remote
    const std::string& name = internal::FunctionName(key);
    const internal::ObjectId id =
        internal::CurrentRuntime().SubmitTask(name, std::move(packed), options_);
    return ObjectRef<Result>(internal::NewObjectHandle(id));
  }

 private:
  FunctionPointer function_;
  internal::TaskOptions options_;
};

template <typename Result, typename... Parameters>
TaskCaller<Result (*)(Parameters...)> Task(Result (*function)(Parameters...)) {
  return TaskCaller<Result (*)(Parameters...)>(function);
}

}  // namespace sray
