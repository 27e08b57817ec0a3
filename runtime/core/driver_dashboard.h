#pragma once

// The job's dashboard as the driver runs it: where the `dashboard` option
// says (default the head's loopback, a free port), with a fresh token, the
// jobs file for the user's tools, and one line telling the user how to open
// it. The state it shows is asked of every node manager (kNodeStatus) on
// each request.
//
// Thread-safety: made and destroyed by the driver's Init and Shutdown; the
// server's threads only read what was given here.

#include <cstdint>
#include <memory>
#include <ostream>
#include <vector>

#include "dashboard/dashboard_server.h"
#include "dashboard/jobs_file.h"
#include "jobsetup/task_environment.h"
#include "transport/transport.h"

namespace sray::core {

struct DriverDashboard {
  std::unique_ptr<dashboard::DashboardServer> server;
  std::unique_ptr<dashboard::JobsFile> jobs_file;
};

// Null when the option says off, or when it cannot start (said on
// `messages`: the job goes on without it). `transport` must outlive it.
std::unique_ptr<DriverDashboard> StartDriverDashboard(const jobsetup::TaskEnvironment& environment,
                                                      transport::Transport& transport,
                                                      std::vector<std::uint32_t> node_manager_ranks,
                                                      std::ostream& messages);

}  // namespace sray::core
