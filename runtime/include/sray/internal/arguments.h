#pragma once

// Turns the arguments of a Remote(...) call into TaskArguments: values are
// serialized as the callee's parameter type, ObjectRefs are passed by
// reference (the owner resolves them before the call runs).

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "sray/internal/contained_refs.h"
#include "sray/internal/runtime.h"
#include "sray/internal/serialization.h"
#include "sray/object_ref.h"

namespace sray::internal {

template <typename Parameter, typename Argument>
TaskArgument PackArgument(Argument&& argument) {
  using Plain = std::decay_t<Argument>;
  // An ObjectRef for a parameter of type ObjectRef travels as a reference
  // (the callee gets it unresolved); for a parameter of type T, as T's value.
  if constexpr (IsObjectRef<Plain>::value && !IsObjectRef<std::decay_t<Parameter>>::value) {
    static_assert(std::is_convertible_v<typename Plain::value_type, std::decay_t<Parameter>>,
                  "sray: an ObjectRef<T> argument needs a parameter of type T");
    return TaskArgument{.value = {}, .reference = argument.checked_handle(), .contained = {}};
  } else {
    // Converted as the callee will see it (an int literal for a double).
    const auto converted = static_cast<std::decay_t<Parameter>>(std::forward<Argument>(argument));
    ContainedRefs contained;
    const ContainedRefsScope capture(&contained);
    std::string value = Serialize(converted);
    return TaskArgument{.value = std::move(value), .reference = {}, .contained = std::move(contained)};
  }
}

template <typename... Parameters, std::size_t... Index, typename Tuple>
std::vector<TaskArgument> PackArgumentsAt(std::index_sequence<Index...>, Tuple&& arguments) {
  std::vector<TaskArgument> packed;
  packed.reserve(sizeof...(Parameters));
  (packed.push_back(PackArgument<std::tuple_element_t<Index, std::tuple<Parameters...>>>(
       std::get<Index>(std::forward<Tuple>(arguments)))),
   ...);
  return packed;
}

template <typename... Parameters, typename... Arguments>
std::vector<TaskArgument> PackArguments(Arguments&&... arguments) {
  static_assert(sizeof...(Arguments) == sizeof...(Parameters),
                "sray: Remote() needs exactly one argument per parameter");
  return PackArgumentsAt<Parameters...>(std::index_sequence_for<Parameters...>{},
                                        std::forward_as_tuple(std::forward<Arguments>(arguments)...));
}

}  // namespace sray::internal
