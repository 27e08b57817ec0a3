// UCX handles against the real UCX library: which transports a context
// takes, what a connect to a peer that just ended reports, and where UCX's
// own lines about it go.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "transport/ucx_handles.h"
#include "transport/ucx_status.h"

namespace sray::transport {
namespace {

// UCX_TLS as given (unset for nullopt) while it lives; UCX reads it when a
// context is created.
class ScopedUcxTls {
 public:
  explicit ScopedUcxTls(std::optional<std::string> value) {
    if (const char* before = std::getenv("UCX_TLS")) before_ = before;
    if (value) {
      ::setenv("UCX_TLS", value->c_str(), 1);
    } else {
      ::unsetenv("UCX_TLS");
    }
  }
  ~ScopedUcxTls() {
    if (before_) {
      ::setenv("UCX_TLS", before_->c_str(), 1);
    } else {
      ::unsetenv("UCX_TLS");
    }
  }
  ScopedUcxTls(const ScopedUcxTls&) = delete;
  ScopedUcxTls& operator=(const ScopedUcxTls&) = delete;

 private:
  std::optional<std::string> before_;
};

// The transport resources a context uses, as UCX prints them.
std::string ResourcesOf(const UcxContext& context) {
  char* buffer = nullptr;
  std::size_t size = 0;
  FILE* stream = ::open_memstream(&buffer, &size);
  if (stream == nullptr) return "(open_memstream failed)";
  ucp_context_print_info(context.handle(), stream);
  std::fclose(stream);
  std::string printed(buffer, size);
  std::free(buffer);
  return printed;
}

// A sender killed between taking a slot in a receiver's shared-memory FIFO
// and flagging it filled silences the receiver's FIFO for good (a node
// manager that never heard from its new workers again): sray's messages go
// over TCP unless the user asks for UCX's shared-memory transports.
TEST(UcxContext, LeavesOutSharedMemoryFifosUnlessUcxTlsNamesThem) {
  {
    ScopedUcxTls unset(std::nullopt);
    auto context = UcxContext::Create("");
    ASSERT_TRUE(context.ok()) << context.status().message();
    const std::string resources = ResourcesOf(**context);
    EXPECT_THAT(resources, testing::HasSubstr("tcp/"));
    EXPECT_THAT(resources, testing::Not(testing::HasSubstr("posix/")));
    EXPECT_THAT(resources, testing::Not(testing::HasSubstr("sysv/")));
  }
  ScopedUcxTls shared_memory("posix,tcp,self");
  auto context = UcxContext::Create("");
  ASSERT_TRUE(context.ok()) << context.status().message();
  EXPECT_THAT(ResourcesOf(**context), testing::HasSubstr("posix/"));
}

TEST(UcxEndpoint, AConnectToAnEndedWorkerKeepsUcxsLinesInTheStatusNotOnTheTerminal) {
  // Shared memory, which users may choose: UCX prints its lines about a
  // peer's missing segment inside the connect.
  ScopedUcxTls shared_memory("shm,tcp,self");
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
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  auto endpoint = UcxEndpoint::Connect(*ours, address_of_ended, "the ended worker",
                                       [](ucp_ep_h, ucs_status_t) {});
  const std::string printed =
      testing::internal::GetCapturedStdout() + testing::internal::GetCapturedStderr();
  ASSERT_FALSE(endpoint.ok()) << "a connect to a worker whose shared memory is gone succeeded";
  EXPECT_THAT(endpoint.status().message(),
              testing::HasSubstr("cannot connect to the ended worker"));
  EXPECT_THAT(endpoint.status().message(), testing::HasSubstr("(UCX: "));
  EXPECT_EQ(printed.find("ERROR"), std::string::npos) << "UCX printed: " << printed;
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
