#pragma once

namespace sray::train::internal {

// True when this sray was built with the NCCL path (a CUDA LibTorch and
// SRAY_WITH_CUDA=ON). Defined in collectives.cc.
bool NcclAvailable();

}  // namespace sray::train::internal
