#pragma once

// What the dashboard shows of a running job, as plain values, and its two
// renderings: JSON for /api and Prometheus text for /metrics. Gathered by
// the driver (core), rendered here without knowing where it came from.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace sray::dashboard {

struct NodeSnapshot {
  std::uint32_t node_id = 0;
  std::string hostname;
  std::map<std::string, double> total;
  std::map<std::string, double> available;
  std::uint64_t queued_tasks = 0;
  std::uint64_t worker_processes = 0;
  std::uint64_t store_capacity = 0;
  std::uint64_t store_in_memory = 0;
  std::uint64_t store_spilled = 0;
  std::uint64_t store_objects = 0;
  std::string error;  // set when the node did not answer
};

struct ClusterSnapshot {
  std::string job_id;
  std::string step_id;
  std::vector<NodeSnapshot> nodes;
};

std::string NodesJson(const ClusterSnapshot& snapshot);
std::string JobJson(const ClusterSnapshot& snapshot);
// Prometheus text exposition format 0.0.4, every sample labelled with the
// job, step and node.
std::string MetricsText(const ClusterSnapshot& snapshot);

}  // namespace sray::dashboard
