#include <gtest/gtest.h>

#include "launcher/embedded_pmix_server.h"

namespace sray::launcher {
namespace {

// `sray run` exits with a rank's PMIx_Abort status; an exit status keeps the
// low 8 bits, so PMIx_Abort(256) made the job end "successfully".
TEST(AbortStatus, AnAbortAlwaysEndsTheJobWithAFailure) {
  EXPECT_EQ(ExitStatusOfAbort(3), 3);
  EXPECT_EQ(ExitStatusOfAbort(255), 255);
  EXPECT_EQ(ExitStatusOfAbort(0), 1);
  EXPECT_EQ(ExitStatusOfAbort(256), 1);
  EXPECT_EQ(ExitStatusOfAbort(-1), 1);
}

}  // namespace
}  // namespace sray::launcher
