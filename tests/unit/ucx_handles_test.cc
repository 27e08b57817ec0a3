// UCX handles against the real UCX library: what a connect to a peer that
// just ended reports, and where UCX's own lines about it go.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "transport/ucx_handles.h"
#include "transport/ucx_status.h"

#include <ucs/config/global_opts.h>
#include <ucs/debug/log_def.h>

namespace sray::transport {
namespace {

TEST(UcxEndpoint, AConnectToAnEndedWorkerKeepsUcxsLinesInTheStatusNotOnTheTerminal) {
  auto context = UcxContext::Create("");
  ASSERT_TRUE(context.ok()) << context.status().message();
  auto ours = UcxWorker::Create(*context);
  ASSERT_TRUE(ours.ok()) << ours.status().message();
  auto other_context = UcxContext::Create("");
  ASSERT_TRUE(other_context.ok()) << other_context.status().message();
  std::vector<std::byte> address_of_ended;
  {
    auto ended = UcxWorker::Create(*other_context);
    ASSERT_TRUE(ended.ok()) << ended.status().message();
    auto address = (*ended)->Address(false);
    ASSERT_TRUE(address.ok()) << address.status().message();
    address_of_ended = *address;
  }
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  auto endpoint = UcxEndpoint::Connect(*ours, address_of_ended, "the ended worker",
                                       [](ucp_ep_h, ucs_status_t) {});
  const std::string printed =
      ::testing::internal::GetCapturedStdout() + ::testing::internal::GetCapturedStderr();
  ASSERT_FALSE(endpoint.ok()) << "a connect to a worker whose shared memory is gone succeeded";
  EXPECT_THAT(endpoint.status().message(),
              ::testing::HasSubstr("cannot connect to the ended worker"));
  EXPECT_THAT(endpoint.status().message(), ::testing::HasSubstr("(UCX: "));
  EXPECT_EQ(printed.find("ERROR"), std::string::npos) << "UCX printed: " << printed;
}

// A driver that returned with tasks in flight: a worker answering its
// wire-up attached to its queue while it exited, and UCX printed
// "open(file_name=/proc/PID/fd/N flags=0x0) failed: Permission denied" and
// "mm ep failed to connect to remote FIFO ..." (slurm.tasks_under_srun).
TEST(UcxLogCapture, UcxsLinesAboutAttachingToAnEndingPeerDoNotReachTheTerminal) {
  InstallUcxLogCapture();
  // UCX prints to stdout unless UCX_LOG_FILE says otherwise.
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  ucs_log_dispatch("mm_posix.c", 219, "uct_posix_mem_attach_common", UCS_LOG_LEVEL_ERROR,
                   &ucs_global_opts.log_component, "open(file_name=%s flags=0x%x) failed: %s",
                   "/proc/2839/fd/33", 0, "Permission denied");
  ucs_log_dispatch("mm_ep.c", 171, "uct_mm_ep_attach_remote_seg", UCS_LOG_LEVEL_ERROR,
                   &ucs_global_opts.log_component,
                   "mm ep failed to connect to remote FIFO id 0x%lx: %s", 0x8000000840000b17UL,
                   "Shared memory error");
  const std::string quiet =
      ::testing::internal::GetCapturedStdout() + ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(quiet.find("ERROR"), std::string::npos) << "UCX printed: " << quiet;
  // The same over System V shared memory, whose segment's id is invalid once
  // its owner ended (a CI run of slurm.tasks_under_srun, 2026-12-06).
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  // UCX's format ends in %m; the text is the same.
  ucs_log_dispatch("mm_sysv.c", 57, "uct_sysv_mem_attach_common", UCS_LOG_LEVEL_ERROR,
                   &ucs_global_opts.log_component, "shmat(shmid=%d) failed: %s", 35979291,
                   "Invalid argument");
  ucs_log_dispatch("mm_ep.c", 171, "uct_mm_ep_attach_remote_seg", UCS_LOG_LEVEL_ERROR,
                   &ucs_global_opts.log_component,
                   "mm ep failed to connect to remote FIFO id 0x%lx: %s", 0x225001bUL,
                   "Shared memory error");
  const std::string quiet_sysv =
      ::testing::internal::GetCapturedStdout() + ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(quiet_sysv.find("ERROR"), std::string::npos) << "UCX printed: " << quiet_sysv;
  // Any other error still reaches the terminal: this process's own, an
  // attach that failed for another reason, and the FIFO line after it.
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  ucs_log_dispatch("mm_posix.c", 1, "f", UCS_LOG_LEVEL_ERROR, &ucs_global_opts.log_component,
                   "open(file_name=%s flags=0x%x) failed: %s", "/dev/shm/ucx_shm_posix_1", 0xc2,
                   "No space left on device");
  ucs_log_dispatch("mm_posix.c", 219, "f", UCS_LOG_LEVEL_ERROR, &ucs_global_opts.log_component,
                   "open(file_name=%s flags=0x%x) failed: %s", "/proc/2839/fd/33", 0,
                   "Too many open files");
  ucs_log_dispatch("mm_ep.c", 171, "f", UCS_LOG_LEVEL_ERROR, &ucs_global_opts.log_component,
                   "mm ep failed to connect to remote FIFO id 0x%lx: %s", 0x8000000840000b17UL,
                   "Shared memory error");
  ucs_log_dispatch("mm_sysv.c", 57, "f", UCS_LOG_LEVEL_ERROR, &ucs_global_opts.log_component,
                   "shmat(shmid=%d) failed: %s", 35979291, "Permission denied");
  const std::string printed =
      ::testing::internal::GetCapturedStdout() + ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(printed, ::testing::HasSubstr("No space left"));
  EXPECT_THAT(printed, ::testing::HasSubstr("Too many open files"));
  EXPECT_THAT(printed, ::testing::HasSubstr("remote FIFO"));
  EXPECT_THAT(printed, ::testing::HasSubstr("Permission denied"));
}

TEST(UcxLogCapture, KeepsLinesOnlyWhileItLivesAndTheInnermostOneKeeps) {
  UcxLogCapture outer;
  {
    UcxLogCapture inner;
    inner.Keep("first");
    inner.Keep("second");
    EXPECT_EQ(inner.messages(), "first; second");
  }
  EXPECT_TRUE(outer.messages().empty());
  const Status status = FromUcs(UCS_ERR_UNREACHABLE, "cannot connect to rank 3", outer);
  EXPECT_EQ(status.message(), "cannot connect to rank 3: Destination is unreachable");
  outer.Keep("shmat failed");
  EXPECT_EQ(FromUcs(UCS_ERR_UNREACHABLE, "cannot connect to rank 3", outer).message(),
            "cannot connect to rank 3 (UCX: shmat failed): Destination is unreachable");
  EXPECT_TRUE(FromUcs(UCS_OK, "nothing", outer).ok());
}

}  // namespace
}  // namespace sray::transport
