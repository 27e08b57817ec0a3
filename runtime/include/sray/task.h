#pragma once

// sray::Task(function).SetResources(...).Remote(args...) -> ObjectRef<R>.

#include <cstddef>
#include <map>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

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
  // Retries after the worker died (default 3; 0 disables).
  TaskCaller& SetMaxRetries(int retries) {
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

  template <typename... Arguments>
  ObjectRef<Result> Remote(Arguments&&... arguments) {
    static_assert(!std::is_void_v<Result>, "sray: a remote function must return a value");
    static_assert(sizeof...(Arguments) == sizeof...(Parameters),
                  "sray: Remote() needs exactly one argument per parameter");
    std::vector<internal::TaskArgument> packed;
    packed.reserve(sizeof...(Arguments));
    Pack(packed, std::index_sequence_for<Parameters...>{},
         std::forward_as_tuple(std::forward<Arguments>(arguments)...));
    const std::string& name = internal::FunctionName(internal::AddressOf(function_));
    const internal::ObjectId id =
        internal::CurrentRuntime().SubmitTask(name, std::move(packed), options_);
    return ObjectRef<Result>(std::make_shared<internal::ObjectHandle>(id));
  }

 private:
  template <typename Parameter, typename Argument>
  static internal::TaskArgument PackOne(Argument&& argument) {
    using Plain = std::decay_t<Argument>;
    if constexpr (IsObjectRef<Plain>::value) {
      static_assert(std::is_convertible_v<typename Plain::value_type, std::decay_t<Parameter>>,
                    "sray: an ObjectRef<T> argument needs a parameter of type T");
      return internal::TaskArgument{.value = {}, .reference = argument.handle()};
    } else {
      // Converted as the function will see it (an int literal for a double).
      const auto converted = static_cast<std::decay_t<Parameter>>(std::forward<Argument>(argument));
      return internal::TaskArgument{.value = internal::Serialize(converted), .reference = {}};
    }
  }

  template <std::size_t... Index, typename Tuple>
  static void Pack(std::vector<internal::TaskArgument>& packed, std::index_sequence<Index...>,
                   Tuple&& arguments) {
    (packed.push_back(PackOne<std::tuple_element_t<Index, std::tuple<Parameters...>>>(
         std::get<Index>(std::forward<Tuple>(arguments)))),
     ...);
  }

  FunctionPointer function_;
  internal::TaskOptions options_;
};

template <typename Result, typename... Parameters>
TaskCaller<Result (*)(Parameters...)> Task(Result (*function)(Parameters...)) {
  return TaskCaller<Result (*)(Parameters...)>(function);
}

}  // namespace sray
