#include "dashboard/dashboard_module.h"

#include <dlfcn.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>

#include "common/whole_number.h"
#include "sray/version.h"

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
    fields >> range >> permissions >> offset >> device >> inode;
    std::getline(fields >> std::ws, path);  // the rest: a path may hold spaces
    constexpr std::string_view kDeleted = " (deleted)";
    if (path.ends_with(kDeleted)) path.resize(path.size() - kDeleted.size());
    const auto dash = range.find('-');
    if (dash == std::string::npos || path.empty() || path.front() != '/') continue;
    const auto start = WholeNumber<std::uintptr_t>(range.substr(0, dash), 16);
    const auto end = WholeNumber<std::uintptr_t>(range.substr(dash + 1), 16);
    if (start && end && own >= *start && own < *end) {
      return std::filesystem::path(path).parent_path();
    }
  }
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&StartDashboardServer), &info) == 0 ||
      info.dli_fname == nullptr) {
    return {};
  }
  std::error_code error;
  const auto absolute = std::filesystem::absolute(info.dli_fname, error);
  return error ? std::filesystem::path() : absolute.parent_path();
}

LoadedModule Load() {
  const std::filesystem::path path = OwnDirectory() / kDashboardModuleName;
  const std::string fix =
      "reinstall sray (libsray_dashboard.so belongs beside libsray.so), or set dashboard=off";
  // RTLD_LOCAL: the module's symbols stay out of the program's lookups; it
  // still binds to libsray's symbols, loaded already.
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    return {.entry = nullptr,
            .failure =
                Status::NotFound("cannot load the dashboard's module: " +
                                 std::string(why != nullptr ? why : path.string()) + ": " + fix)};
  }
  auto* version =
      reinterpret_cast<DashboardModuleVersion>(::dlsym(handle, kDashboardModuleVersion));
  const std::string built_with = version != nullptr ? version() : "no version";
  if (built_with != kDashboardModuleBuild) {
    return {.entry = nullptr,
            .failure = Status::InvalidArgument(
                path.string() + " belongs to sray " + built_with + ", this program's libsray is " +
                kDashboardModuleBuild + ": reinstall sray, so both come from one version")};
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
  Result<std::unique_ptr<DashboardServer>> result = Status::Internal(
      "the dashboard's module returned no server: reinstall sray, or set dashboard=off");
  module.entry(&options, &result);
  return result;
}

}  // namespace sray::dashboard
