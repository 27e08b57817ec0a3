#pragma once

namespace sray::train::internal {

// True when this sray was built with the NCCL path (a CUDA LibTorch and
// SRAY_WITH_CUDA=ON). Defined in collectives.cc.
bool NcclAvailable();
// True when this sray was built with Gloo's headers (the CPU path): a pip
// wheel's LibTorch ships none. Defined in collectives.cc.
bool GlooAvailable();

}  // namespace sray::train::internal
