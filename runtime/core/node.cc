#include "sray/node.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "common/host_name.h"
#include "core/local_mode.h"

#include "jobsetup/task_environment.h"
#include "sray/errors.h"

namespace sray {

NodeInfo CurrentNode() {
  if (core::InLocalMode()) {
    // One node: this machine, as the program sees it.
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page_size = ::sysconf(_SC_PAGE_SIZE);
    return NodeInfo{.role = "head",
                    .node_id = 0,
                    .num_nodes = 1,
                    .head_host = HostName(),
                    .session_dir = "",
                    .job_id = "local",
                    .step_id = "0",
                    .cpus = std::max(1U, std::thread::hardware_concurrency()),
                    .memory_bytes = pages > 0 && page_size > 0
                                        ? static_cast<std::uint64_t>(pages) *
                                              static_cast<std::uint64_t>(page_size)
                                        : 0};
  }
  auto environment =
      jobsetup::ReadTaskEnvironment([](const char* name) { return std::getenv(name); });
  if (!environment.ok()) throw LaunchError("sray: " + environment.status().message());
  return NodeInfo{.role = environment->role,
                  .node_id = environment->node_id,
                  .num_nodes = environment->num_nodes,
                  .head_host = environment->head_host,
                  .session_dir = environment->session_dir,
                  .job_id = environment->job_id,
                  .step_id = environment->step_id,
                  .cpus = environment->node_cpus,
                  .memory_bytes = environment->node_memory_bytes};
}

}  // namespace sray
