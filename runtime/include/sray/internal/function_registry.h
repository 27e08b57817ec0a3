#pragma once

// Remote functions and actor classes by name. SRAY_REMOTE(f, Class::Create,
// &Class::Method) registers each under its spelling, in every process of the
// job (the same binary runs everywhere); Task(f), Actor(Class::Create) and
// handle.Task(&Class::Method) find the name again from the pointer. A
// function returning `Class*` is an actor factory; a member function is an
// actor method.
//
// Thread-safety: registration happens during static initialisation; lookups
// may run on any thread afterwards.

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "sray/internal/serialization.h"

namespace sray::internal {

// Runs a function on serialized arguments and returns its serialized result.
using Invoker = std::function<std::string(const std::vector<std::string_view>& arguments)>;
// An actor's instance and its class, so a method of another class (a
// GetActor<WrongClass> handle) is refused instead of run on the wrong type.
struct ActorInstance {
  std::shared_ptr<void> object;
  const std::type_info* type = nullptr;
};
// Builds an actor's instance from serialized arguments.
using ActorFactory = std::function<ActorInstance(const std::vector<std::string_view>& arguments)>;
// Runs a method on an instance made by a factory.
using MethodInvoker = std::function<std::string(const ActorInstance& instance,
                                                const std::vector<std::string_view>& arguments)>;

// The bytes of a function or member-function pointer: member pointers do not
// convert to integers, and the bytes identify either kind.
using FunctionKey = std::string;
template <typename Pointer>
FunctionKey KeyOf(Pointer pointer) {
  FunctionKey key(sizeof(Pointer), '\0');
  std::memcpy(key.data(), &pointer, sizeof(Pointer));
  return key;
}

void RegisterFunction(std::string name, FunctionKey key, Invoker invoker);
void RegisterActorFactory(std::string name, FunctionKey key, ActorFactory factory);
void RegisterMethod(std::string name, FunctionKey key, MethodInvoker invoker);
// Throws sray::Error naming the fix when the function was not registered.
const std::string& FunctionName(const FunctionKey& key);
// Null when nothing of that kind has this name.
const Invoker* FindInvoker(const std::string& name);
const ActorFactory* FindActorFactory(const std::string& name);
const MethodInvoker* FindMethod(const std::string& name);

// A readable (demangled) name of a type, for messages.
std::string TypeName(const std::type_info& type);

// A parameter that only views memory (std::string_view, std::span, a
// pointer) would point into the message its argument was read from, which
// is freed once it is read: the function would see other bytes, silently.
template <typename T>
struct ViewsMemory : std::is_pointer<T> {};
template <typename Char, typename Traits>
struct ViewsMemory<std::basic_string_view<Char, Traits>> : std::true_type {};
template <typename T, std::size_t Extent>
struct ViewsMemory<std::span<T, Extent>> : std::true_type {};

template <typename... Parameters>
constexpr void CheckOwningParameters() {
  static_assert(
      !(ViewsMemory<std::decay_t<Parameters>>::value || ...),
      "sray: the parameters of a remote function, actor factory or actor method must own "
      "their data (std::string, std::vector), not view it (std::string_view, std::span, a "
      "pointer): an argument's bytes are freed once it is read");
}

inline void CheckArgumentCount(std::size_t given, std::size_t taken) {
  if (given != taken) {
    throw SerializationError{"sray: called with " + std::to_string(given) +
                             " arguments but it takes " + std::to_string(taken)};
  }
}

template <typename Result, typename... Parameters, std::size_t... Index>
std::string InvokeWith(Result (*function)(Parameters...),
                       const std::vector<std::string_view>& arguments,
                       std::index_sequence<Index...>) {
  CheckOwningParameters<Parameters...>();
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
    CheckArgumentCount(arguments.size(), sizeof...(Parameters));
    return InvokeWith(function, arguments, std::index_sequence_for<Parameters...>{});
  };
}

template <typename Class, typename... Parameters, std::size_t... Index>
ActorInstance ConstructWith(Class* (*factory)(Parameters...),
                                    const std::vector<std::string_view>& arguments,
                                    std::index_sequence<Index...>) {
  CheckOwningParameters<Parameters...>();
  std::tuple<std::decay_t<Parameters>...> values{
      Deserialize<std::decay_t<Parameters>>(arguments[Index], "an actor argument")...};
  Class* object = factory(std::get<Index>(std::move(values))...);
  if (object == nullptr) throw std::runtime_error("the actor factory returned a null pointer");
  return ActorInstance{
      std::shared_ptr<void>(object, [](void* instance) { delete static_cast<Class*>(instance); }),
      &typeid(Class)};
}

template <typename Class, typename... Parameters>
ActorFactory MakeActorFactory(Class* (*factory)(Parameters...)) {
  return [factory](const std::vector<std::string_view>& arguments) {
    CheckArgumentCount(arguments.size(), sizeof...(Parameters));
    return ConstructWith(factory, arguments, std::index_sequence_for<Parameters...>{});
  };
}

template <typename Class, typename Method, typename Result, typename... Parameters,
          std::size_t... Index>
std::string InvokeMethodWith(Method method, Class* instance,
                             const std::vector<std::string_view>& arguments,
                             std::index_sequence<Index...>) {
  CheckOwningParameters<Parameters...>();
  std::tuple<std::decay_t<Parameters>...> values{
      Deserialize<std::decay_t<Parameters>>(arguments[Index], "an actor call argument")...};
  if constexpr (std::is_void_v<Result>) {
    (instance->*method)(std::get<Index>(std::move(values))...);
    return Serialize(msgpack::type::nil_t());
  } else {
    return Serialize((instance->*method)(std::get<Index>(std::move(values))...));
  }
}

template <typename Class, typename Method, typename Result, typename... Parameters>
MethodInvoker MakeMethodInvoker(Method method) {
  return [method](const ActorInstance& instance, const std::vector<std::string_view>& arguments) {
    if (instance.type == nullptr || *instance.type != typeid(Class)) {
      throw std::logic_error("this actor is a " +
                             (instance.type != nullptr ? TypeName(*instance.type) : "unknown class") +
                             ", not a " + TypeName(typeid(Class)) +
                             ": the ActorHandle's class (GetActor<Class>) must be the actor's");
    }
    CheckArgumentCount(arguments.size(), sizeof...(Parameters));
    return InvokeMethodWith<Class, Method, Result, Parameters...>(
        method, static_cast<Class*>(instance.object.get()), arguments,
        std::index_sequence_for<Parameters...>{});
  };
}

template <typename Result, typename... Parameters>
void RegisterOne(std::string name, Result (*function)(Parameters...)) {
  if constexpr (std::is_pointer_v<Result> && std::is_class_v<std::remove_pointer_t<Result>>) {
    RegisterActorFactory(std::move(name), KeyOf(function), MakeActorFactory(function));
  } else {
    RegisterFunction(std::move(name), KeyOf(function), MakeInvoker(function));
  }
}

template <typename Result, typename Class, typename... Parameters>
void RegisterOne(std::string name, Result (Class::*method)(Parameters...)) {
  RegisterMethod(std::move(name), KeyOf(method),
                 MakeMethodInvoker<Class, decltype(method), Result, Parameters...>(method));
}

template <typename Result, typename Class, typename... Parameters>
void RegisterOne(std::string name, Result (Class::*method)(Parameters...) const) {
  RegisterMethod(std::move(name), KeyOf(method),
                 MakeMethodInvoker<Class, decltype(method), Result, Parameters...>(method));
}

// "f, ns::g, &C::m" -> {"f", "ns::g", "C::m"}
std::vector<std::string> SplitNames(std::string_view names);

template <typename... Pointers>
bool RegisterFunctions(const char* names, Pointers... pointers) {
  const std::vector<std::string> split = SplitNames(names);
  std::size_t index = 0;
  (RegisterOne(split.at(index++), pointers), ...);
  return true;
}

}  // namespace sray::internal

#define SRAY_CONCAT_INNER(a, b) a##b
#define SRAY_CONCAT(a, b) SRAY_CONCAT_INNER(a, b)
// Registers remote functions and actor classes:
//   SRAY_REMOTE(process_data, sum_all);
//   SRAY_REMOTE(Counter::Create, &Counter::Add, &Counter::Value);
// Named by __COUNTER__, not __LINE__: a header's SRAY_REMOTE and one of the
// including file on the same line number would otherwise collide.
#define SRAY_REMOTE(...)                                                             \
  [[maybe_unused]] static const bool SRAY_CONCAT(sray_remote_registered_, __COUNTER__) = \
      ::sray::internal::RegisterFunctions(#__VA_ARGS__, __VA_ARGS__)
