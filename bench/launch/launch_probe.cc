// The sray side of bench/launch: a driver that has the result of one task
// from every node of its step, then ends. Prints, on the driver only,
//   launch_probe job=J.S nodes=N main_ns=T init_ns=T results_ns=T shutdown_ns=T
// (CLOCK_REALTIME, so bench/launch/run can take them from its own start).
// Run: srun -N3 --ray-cluster launch_probe, or sray run -N3 launch_probe.

#include <time.h>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include <sray/api.h>

#include "common/every_node.h"

namespace {

std::int64_t RealtimeNanoseconds() {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return std::int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t main_ns = RealtimeNanoseconds();
  sray::Init(argc, argv);
  const std::int64_t init_ns = RealtimeNanoseconds();
  const sray::NodeInfo self = sray::CurrentNode();
  const std::uint32_t nodes = self.num_nodes;
  const std::set<std::uint32_t> answered = sray_bench::RunOnEveryNode(nodes);
  const std::int64_t results_ns = RealtimeNanoseconds();
  if (answered.size() != nodes) {
    std::cerr << "launch_probe: tasks ran on " << answered.size() << " of " << nodes
              << " nodes after 20 rounds\n";
    return 1;
  }
  sray::Shutdown();
  const std::int64_t shutdown_ns = RealtimeNanoseconds();
  std::cout << "launch_probe job=" << self.job_id << "." << self.step_id << " nodes=" << nodes
            << " main_ns=" << main_ns << " init_ns=" << init_ns << " results_ns=" << results_ns
            << " shutdown_ns=" << shutdown_ns << std::endl;
  return 0;
}
