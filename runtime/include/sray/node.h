#pragma once

// What this process knows about its place in the step: which node it runs on,
// that node's role and resources, and the step's session directory.

#include <cstdint>
#include <string>

namespace sray {

struct NodeInfo {
  std::string role;  // "head" on node 0, "worker" elsewhere
  std::uint32_t node_id = 0;
  std::uint32_t num_nodes = 0;
  std::string head_host;
  std::string session_dir;
  std::string job_id;
  std::string step_id;
  // What this node gives the step: the scheduler's CPU and memory resources.
  std::uint32_t cpus = 0;
  std::uint64_t memory_bytes = 0;
};

// Reads the launch environment of this process. Throws sray::LaunchError
// naming the missing variable when the process was not launched by sray. In
// local mode (sray::InitOptions::local_mode) it describes the one node:
// this machine, node 0 of 1.
// Thread-safe as long as nobody modifies the environment concurrently.
NodeInfo CurrentNode();

}  // namespace sray
