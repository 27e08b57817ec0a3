#pragma once

// The dashboard's HTTP server, loaded on the head only: libsray_dashboard.so,
// installed next to libsray, holds the server and cpp-httplib, OpenSSL and
// the compression libraries behind it. Linked into libsray, they cost every
// rank and worker process about 4 ms of CPU at its start (cpp-httplib sets
// OpenSSL up as it is loaded), for a server one process of the job runs.
//
// Thread-safety: StartDashboardServer may be called from any thread. The
// module is loaded once and never unloaded (servers it made may outlive any
// one caller).

#include <memory>

#include "common/status.h"
#include "dashboard/dashboard_server.h"
#include "sray/version.h"

namespace sray::dashboard {

// The module's file name, looked for in libsray's own directory.
inline constexpr const char* kDashboardModuleName = "libsray_dashboard.so";
// The symbols the module exports (dashboard_module_entry.cc): the sray
// version it was built with, checked before anything else, since C++ types
// cross between the two (a module of another version, installed over this
// one's, fails with the fix instead of misreading them); and the entry, which
// starts a server as DashboardServer::Start does.
inline constexpr const char* kDashboardModuleVersion = "sray_dashboard_module_version";
// What the version symbol says: sray's version and the revision of the
// DashboardServer interface, raised with each change to its virtual
// functions or to DashboardOptions (2: Stop; 3: no cookie name), so that a
// module built before one fails the check.
inline constexpr const char* kDashboardModuleBuild = SRAY_VERSION_STRING "/dashboard-interface-3";
inline constexpr const char* kDashboardModuleEntry = "sray_dashboard_module_start";
using DashboardModuleVersion = const char* (*)();
using DashboardModuleEntry = void (*)(DashboardOptions* options,
                                      Result<std::unique_ptr<DashboardServer>>* result);

// DashboardServer::Start, through the module; an error names the file that
// could not be loaded and the fix.
Result<std::unique_ptr<DashboardServer>> StartDashboardServer(DashboardOptions options);

// Loads the module now (once per process; a failure is kept for
// StartDashboardServer to report): the head does it on a thread of its own
// while it waits for the nodes to register, so that loading (about 4 ms of
// CPU) is not on the way to the job's first task.
void LoadDashboardModule();

}  // namespace sray::dashboard
