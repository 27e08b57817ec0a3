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
#include <filesystem>
#include <memory>
#include <ostream>
#include <vector>

#include "core/actor_directory.h"
#include "dashboard/dashboard_server.h"
#include "dashboard/jobs_file.h"
#include "jobsetup/task_environment.h"
#include "transport/transport.h"

namespace sray::core {

struct DriverDashboard {
  std::unique_ptr<dashboard::DashboardServer> server;
  std::unique_ptr<dashboard::JobsFile> jobs_file;
};

// False when the dashboard option says off.
bool DashboardWanted();

// Null when the option says off, or when it cannot start (said on
// `messages`: the job goes on without it). `transport` and `directory` (the
// head's actors and placement groups) must outlive it.
std::unique_ptr<DriverDashboard> StartDriverDashboard(const jobsetup::TaskEnvironment& environment,
                                                      transport::Transport& transport,
                                                      std::vector<std::uint32_t> node_manager_ranks,
                                                      ActorDirectory& directory,
                                                      std::ostream& messages);

// The job's actors as /api/actors lists them, written to `path` (mode
// 0600) so `sray logs --actor NAME --log-dir DIR` finds an actor's log after
// the job. Called at Shutdown when log_dir= is set.
Status WriteActorIndex(ActorDirectory& directory, const std::filesystem::path& path);

}  // namespace sray::core
