#include "dashboard/dashboard_module.h"

#include <dlfcn.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>

namespace sray::dashboard {
namespace {

struct LoadedModule {
  DashboardModuleEntry entry = nullptr;
  Status failure;
};

// This library's own directory: the module is installed (and built) beside
// it, wherever the prefix is. From /proc/self/maps, whose paths are absolute
// (dladdr's may be relative to a directory the program has left since).
std::filesystem::path OwnDirectory() {
  const auto own = reinterpret_cast<std::uintptr_t>(&StartDashboardServer);
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    std::istringstream fields(line);
    std::string range, permissions, offset, device, inode, path;
    fields >> range >> permissions >> offset >> device >> inode >> path;
    const auto dash = range.find('-');
    if (dash == std::string::npos || path.empty() || path.front() != '/') continue;
    const auto start = std::stoull(range.substr(0, dash), nullptr, 16);
    const auto end = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (own >= start && own < end) return std::filesystem::path(path).parent_path();
  }
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&StartDashboardServer), &info) == 0 ||
      info.dli_fname == nullptr) {
    return {};
  }
  return std::filesystem::absolute(info.dli_fname).parent_path();
}

LoadedModule Load() {
  const std::filesystem::path path = OwnDirectory() / kDashboardModuleName;
  // RTLD_LOCAL: the module's httplib and OpenSSL stay out of the program's
  // symbol lookups; it still binds to libsray's symbols, loaded already.
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    return {.entry = nullptr,
            .failure = Status::NotFound(
                "cannot load " + path.string() + " (" + (why != nullptr ? why : "unknown error") +
                "): it is installed with libsray; reinstall sray, or set dashboard=off")};
  }
  auto* entry = reinterpret_cast<DashboardModuleEntry>(::dlsym(handle, kDashboardModuleEntry));
  if (entry == nullptr) {
    return {
        .entry = nullptr,
        .failure = Status::Internal(path.string() + " has no " + kDashboardModuleEntry +
                                    ": it is not this sray's dashboard module; reinstall sray")};
  }
  return {.entry = entry, .failure = Status::Ok()};
}

const LoadedModule& TheModule() {
  static std::once_flag once;
  static LoadedModule module;
  std::call_once(once, [] { module = Load(); });
  return module;
}

}  // namespace

void LoadDashboardModule() {
  (void)TheModule();
}

Result<std::unique_ptr<DashboardServer>> StartDashboardServer(DashboardOptions options) {
  const LoadedModule& module = TheModule();
  if (module.entry == nullptr) return module.failure;
  Result<std::unique_ptr<DashboardServer>> result =
      Status::Internal("the dashboard module answered nothing");
  module.entry(&options, &result);
  return result;
}

}  // namespace sray::dashboard
