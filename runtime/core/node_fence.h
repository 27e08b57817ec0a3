#pragma once

// Every process that hears of a lost node shuts that node's processes out
// of its transport. A node lost because it stopped answering may be alive
// (frozen, overloaded, cut off) and come back: by then its tasks ran again
// elsewhere and its actors restarted, so nothing it still sends may count,
// and calls that wait for it must fail now rather than at their timeout.
//
// Thread-safety: as Transport::Fence (any thread).

#include "core/protocol.h"
#include "transport/transport.h"

namespace sray::core {

// Fences off the lost node's manager (`lost.rank`) and every worker rank
// its manager could have given out.
void FenceLostNode(transport::Transport& transport, const NodeLost& lost);

}  // namespace sray::core
