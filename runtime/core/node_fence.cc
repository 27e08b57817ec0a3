#include "core/node_fence.h"

#include <string>

namespace sray::core {

void FenceLostNode(transport::Transport& transport, const NodeLost& lost) {
  // Node 0 holds the head and the driver: never lost, never fenced (a
  // message that says otherwise is malformed).
  if (lost.node == 0) return;
  const Status cause =
      Status::Unavailable("node " + std::to_string(lost.node) + " was lost (" + lost.cause +
                          ") and is out of the job: what its processes still send is not acted on");
  if (lost.rank != 0) transport.Fence(lost.rank, lost.rank, cause);
  const std::uint32_t first_worker = kFirstWorkerRank + lost.node * kWorkersPerNodeLimit;
  transport.Fence(first_worker, first_worker + kWorkersPerNodeLimit - 1, cause);
}

}  // namespace sray::core
