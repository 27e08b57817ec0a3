#pragma once

// The bench probes' way to start every node's first worker: tasks that each
// take a whole node's CPUs, submitted together so one lands on each node,
// asked again until every node answered (whatever the scheduler did).
// Include from one file of a program: it registers its task.

#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include <sray/api.h>

namespace sray_bench {

inline std::uint32_t node_of_task() {
  return sray::CurrentNode().node_id;
}

// The nodes that ran a task, after at most `rounds` rounds.
inline std::set<std::uint32_t> RunOnEveryNode(std::uint32_t nodes, int rounds = 20) {
  const char* node_cpus = std::getenv("SRAY_NODE_CPUS");
  const double cpus = node_cpus != nullptr ? std::stod(node_cpus) : 1.0;
  std::set<std::uint32_t> answered;
  for (int round = 0; round < rounds && answered.size() < nodes; ++round) {
    std::vector<sray::ObjectRef<std::uint32_t>> refs;
    for (std::uint32_t node = 0; node < nodes; ++node) {
      refs.push_back(sray::Task(node_of_task).SetResources({{"CPU", cpus}}).Remote());
    }
    for (const std::uint32_t node : sray::Get(refs)) answered.insert(node);
  }
  return answered;
}

}  // namespace sray_bench

SRAY_REMOTE(sray_bench::node_of_task);
