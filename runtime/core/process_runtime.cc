#include "core/process_runtime.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <atomic>
#include <mutex>
#include <unordered_map>

#include "common/pooled_allocator.h"
#include "core/owner.h"
#include "sray/errors.h"
#include "sray/internal/actor_process.h"
#include "sray/internal/function_registry.h"

namespace sray::core {
namespace {

std::atomic<Owner*> current_runtime{nullptr};
std::atomic<bool> ends_with_actor{false};

struct FunctionTable {
  std::mutex mutex;
  std::unordered_map<std::string, internal::Invoker> functions;
  std::unordered_map<std::string, internal::ActorFactory> factories;
  std::unordered_map<std::string, internal::MethodInvoker> methods;
  std::unordered_map<internal::FunctionKey, std::string> names;
};

FunctionTable& Functions() {
  static FunctionTable table;  // first use during static initialisation
  return table;
}

}  // namespace

void SetProcessRuntime(Owner* owner) {
  current_runtime.store(owner);
}

Owner* ProcessRuntime() {
  return current_runtime.load();
}

bool ProcessEndsWithActor() {
  return ends_with_actor.load();
}

}  // namespace sray::core

namespace sray::internal {

void EndProcessWithActor() {
  core::ends_with_actor.store(true);
}

Runtime& CurrentRuntime() {
  core::Owner* runtime = core::ProcessRuntime();
  if (runtime == nullptr) {
    throw LaunchError(
        "sray: the runtime is not running: call sray::Init(argc, argv) at the top of main, "
        "and do not use sray after sray::Shutdown()");
  }
  return *runtime;
}

ObjectHandle::~ObjectHandle() {
  if (Runtime* runtime = core::ProcessRuntime()) runtime->RemoveReference(id_);
}

std::shared_ptr<ObjectHandle> NewObjectHandle(ObjectId id) {
  return std::allocate_shared<ObjectHandle>(PooledAllocator<ObjectHandle>(), id);
}

namespace {

// Adds `entry` under `name` to the table's map `member`.
template <typename Entry>
void AddEntry(std::unordered_map<std::string, Entry> core::FunctionTable::*member,
              std::string name, FunctionKey key, Entry entry) {
  auto& table = core::Functions();
  std::lock_guard lock(table.mutex);
  table.names[std::move(key)] = name;
  (table.*member)[std::move(name)] = std::move(entry);
}

template <typename Entry>
const Entry* FindEntry(std::unordered_map<std::string, Entry> core::FunctionTable::*member,
                       const std::string& name) {
  auto& table = core::Functions();
  std::lock_guard lock(table.mutex);
  auto found = (table.*member).find(name);
  return found == (table.*member).end() ? nullptr : &found->second;
}

}  // namespace

void RegisterFunction(std::string name, FunctionKey key, Invoker invoker) {
  AddEntry(&core::FunctionTable::functions, std::move(name), std::move(key), std::move(invoker));
}

void RegisterActorFactory(std::string name, FunctionKey key, ActorFactory factory) {
  AddEntry(&core::FunctionTable::factories, std::move(name), std::move(key), std::move(factory));
}

void RegisterMethod(std::string name, FunctionKey key, MethodInvoker invoker) {
  AddEntry(&core::FunctionTable::methods, std::move(name), std::move(key), std::move(invoker));
}

const std::string& FunctionName(const FunctionKey& key) {
  auto& table = core::Functions();
  std::lock_guard lock(table.mutex);
  auto found = table.names.find(key);
  if (found == table.names.end()) {
    throw Error(
        "sray: this function is not registered as a remote function, actor factory or actor "
        "method: add SRAY_REMOTE(name) at namespace scope next to its definition");
  }
  return found->second;
}

const Invoker* FindInvoker(const std::string& name) {
  return FindEntry(&core::FunctionTable::functions, name);
}

const ActorFactory* FindActorFactory(const std::string& name) {
  return FindEntry(&core::FunctionTable::factories, name);
}

const MethodInvoker* FindMethod(const std::string& name) {
  return FindEntry(&core::FunctionTable::methods, name);
}

std::string TypeName(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> readable(
      abi::__cxa_demangle(type.name(), nullptr, nullptr, &status), &std::free);
  return status == 0 && readable ? std::string(readable.get()) : std::string(type.name());
}

std::vector<std::string> SplitNames(std::string_view names) {
  std::vector<std::string> split;
  std::size_t position = 0;
  while (position <= names.size()) {
    const auto comma = names.find(',', position);
    const auto end = comma == std::string_view::npos ? names.size() : comma;
    std::string_view name = names.substr(position, end - position);
    while (!name.empty() && (name.front() == ' ' || name.front() == '&')) name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    split.emplace_back(name);
    if (comma == std::string_view::npos) break;
    position = comma + 1;
  }
  return split;
}

}  // namespace sray::internal
