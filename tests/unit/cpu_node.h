#pragma once

// A node of a test cluster that offers only CPUs: node id, transport rank
// and host name all follow `id`.

#include <cstdint>
#include <string>

#include "core/protocol.h"

namespace sray::core {

inline NodeDescription CpuNode(std::uint32_t id, double cpus) {
  return NodeDescription{.node_id = id,
                         .rank = id,
                         .hostname = "n" + std::to_string(id),
                         .total = {{"CPU", cpus}},
                         .store_capacity = 0};
}

}  // namespace sray::core
