// The entry point of libsray_dashboard.so (dashboard_module.h): built into
// the module only, with the same headers and compiler as libsray, so the C++
// types passed by pointer agree.

#include "dashboard/dashboard_module.h"
#include "sray/version.h"

extern "C" __attribute__((visibility("default"))) const char* sray_dashboard_module_version() {
  return sray::dashboard::kDashboardModuleBuild;
}

extern "C" __attribute__((visibility("default"))) void sray_dashboard_module_start(
    sray::dashboard::DashboardOptions* options,
    sray::Result<std::unique_ptr<sray::dashboard::DashboardServer>>* result) {
  *result = sray::dashboard::DashboardServer::Start(std::move(*options));
}
