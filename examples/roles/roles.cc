// Prints where this process sits in its sray cluster: run it with
//   srun -N3 --ray-cluster ./roles
// and each node reports its role (head on node 0, worker elsewhere).

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "sray/errors.h"
#include "sray/node.h"

int main() {
  try {
    const sray::NodeInfo node = sray::CurrentNode();
    char host[HOST_NAME_MAX + 1] = {};
    gethostname(host, sizeof(host) - 1);
    const char* slurm_node = std::getenv("SLURMD_NODENAME");
    std::ostringstream line;
    line << "node " << node.node_id << " of " << node.num_nodes << " on "
         << (slurm_node != nullptr ? slurm_node : host) << ": " << node.role << " (head "
         << node.head_host << ", job " << node.job_id << "." << node.step_id << ", session "
         << node.session_dir << ", pid " << getpid() << ")\n";
    std::cout << line.str() << std::flush;
    return 0;
  } catch (const sray::Error& error) {
    std::cerr << error.what() << "\n";
    return 1;
  }
}
