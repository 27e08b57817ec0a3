#include "core/process_runtime.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>

#include "sray/errors.h"
#include "sray/internal/function_registry.h"

namespace sray::core {
namespace {

std::atomic<internal::Runtime*> current_runtime{nullptr};

struct FunctionTable {
  std::mutex mutex;
  std::unordered_map<std::string, internal::Invoker> by_name;
  std::unordered_map<std::uintptr_t, std::string> by_address;
};

FunctionTable& Functions() {
  static FunctionTable table;  // first use during static initialisation
  return table;
}

}  // namespace

void SetProcessRuntime(internal::Runtime* runtime) {
  current_runtime.store(runtime);
}

internal::Runtime* ProcessRuntime() {
  return current_runtime.load();
}

}  // namespace sray::core

namespace sray::internal {

Runtime& CurrentRuntime() {
  Runtime* runtime = core::ProcessRuntime();
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

void RegisterFunction(std::string name, std::uintptr_t address, Invoker invoker) {
  auto& table = core::Functions();
  std::lock_guard lock(table.mutex);
  table.by_address[address] = name;
  table.by_name[std::move(name)] = std::move(invoker);
}

const std::string& FunctionName(std::uintptr_t address) {
  auto& table = core::Functions();
  std::lock_guard lock(table.mutex);
  auto found = table.by_address.find(address);
  if (found == table.by_address.end()) {
    throw Error(
        "sray: this function is not registered as a remote function: add SRAY_REMOTE(name) "
        "at namespace scope next to its definition");
  }
  return found->second;
}

const Invoker* FindInvoker(const std::string& name) {
  auto& table = core::Functions();
  std::lock_guard lock(table.mutex);
  auto found = table.by_name.find(name);
  return found == table.by_name.end() ? nullptr : &found->second;
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
