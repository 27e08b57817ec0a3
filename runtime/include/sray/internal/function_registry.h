#pragma once

// Remote functions by name. SRAY_REMOTE(f, g) registers each function under
// its spelling, in every process of the job (the same binary runs
// everywhere), and Task(f) finds the name again from the function's address.
//
// Thread-safety: registration happens during static initialisation; lookups
// may run on any thread afterwards.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "sray/internal/serialization.h"

namespace sray::internal {

// Runs a function on serialized arguments and returns its serialized result.
using Invoker = std::function<std::string(const std::vector<std::string_view>& arguments)>;

void RegisterFunction(std::string name, std::uintptr_t address, Invoker invoker);
// Throws sray::Error naming the fix when the function was not registered.
const std::string& FunctionName(std::uintptr_t address);
// Null when no function has this name.
const Invoker* FindInvoker(const std::string& name);

template <typename Function>
std::uintptr_t AddressOf(Function* function) {
  return reinterpret_cast<std::uintptr_t>(function);
}

template <typename Result, typename... Parameters, std::size_t... Index>
std::string InvokeWith(Result (*function)(Parameters...),
                       const std::vector<std::string_view>& arguments,
                       std::index_sequence<Index...>) {
  std::tuple<std::decay_t<Parameters>...> values{
      Deserialize<std::decay_t<Parameters>>(arguments[Index], "a task argument")...};
  if constexpr (std::is_void_v<Result>) {
    function(std::get<Index>(std::move(values))...);
    return Serialize(msgpack::type::nil_t());
  } else {
    return Serialize(function(std::get<Index>(std::move(values))...));
  }
}

template <typename Result, typename... Parameters>
Invoker MakeInvoker(Result (*function)(Parameters...)) {
  return [function](const std::vector<std::string_view>& arguments) {
    if (arguments.size() != sizeof...(Parameters)) {
      throw SerializationError{"sray: task called with " + std::to_string(arguments.size()) +
                               " arguments but it takes " +
                               std::to_string(sizeof...(Parameters))};
    }
    return InvokeWith(function, arguments, std::index_sequence_for<Parameters...>{});
  };
}

// "f, ns::g" -> {"f", "ns::g"}
std::vector<std::string> SplitNames(std::string_view names);

template <typename... Functions>
bool RegisterFunctions(const char* names, Functions*... functions) {
  const std::vector<std::string> split = SplitNames(names);
  std::size_t index = 0;
  (RegisterFunction(split.at(index++), AddressOf(functions), MakeInvoker(functions)), ...);
  return true;
}

}  // namespace sray::internal

#define SRAY_CONCAT_INNER(a, b) a##b
#define SRAY_CONCAT(a, b) SRAY_CONCAT_INNER(a, b)
// Registers remote functions: SRAY_REMOTE(process_data, sum_all);
#define SRAY_REMOTE(...)                                                          \
  [[maybe_unused]] static const bool SRAY_CONCAT(sray_remote_registered_, __LINE__) = \
      ::sray::internal::RegisterFunctions(#__VA_ARGS__, __VA_ARGS__)
