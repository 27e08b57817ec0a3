#include "train/backends_available.h"

#include <string>

#include <gtest/gtest.h>

namespace sray::train::internal {
namespace {

// What a run needs and this build lacks is said once, with the fix, by Fit
// and by the group behind it alike.
TEST(BackendsAvailable, ARunThisBuildCannotServeIsNamedWithTheFix) {
  const std::string gpu = MissingBackend(true);
  EXPECT_EQ(gpu.empty(), NcclAvailable());
  if (!NcclAvailable()) {
    EXPECT_NE(gpu.find("use_gpu"), std::string::npos) << gpu;
    EXPECT_NE(gpu.find("SRAY_WITH_CUDA=ON"), std::string::npos) << gpu;
  }
  const std::string cpu = MissingBackend(false);
  EXPECT_EQ(cpu.empty(), GlooAvailable());
  if (!GlooAvailable()) {
    EXPECT_NE(cpu.find("Gloo"), std::string::npos) << cpu;
    EXPECT_NE(cpu.find("use_gpu=true"), std::string::npos) << cpu;
  }
}

}  // namespace
}  // namespace sray::train::internal
