#include "sray/node.h"

#include <cstdlib>

#include "jobsetup/task_environment.h"
#include "sray/errors.h"

namespace sray {

NodeInfo CurrentNode() {
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
