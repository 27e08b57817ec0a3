#pragma once

#include <string>

namespace sray::train::internal {

// Which c10d backends this sray was built with; Fit checks them before it
// starts a group, so that a run the build cannot serve fails with the fix.

// True when this sray was built with the NCCL path (a CUDA LibTorch and
// SRAY_WITH_CUDA=ON). Defined in collectives.cc.
bool NcclAvailable();
// True when this sray was built with Gloo's headers (the CPU path): a pip
// wheel's LibTorch ships none. Defined in collectives.cc.
bool GlooAvailable();
// Empty when this build has the backend a run needs (NCCL with use_gpu,
// Gloo without); otherwise what is missing and the fix, for Fit's error and
// for the group's own check behind it.
std::string MissingBackend(bool use_gpu);

}  // namespace sray::train::internal
