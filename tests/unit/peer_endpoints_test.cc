// PeerEndpoints against the real UCX library: a failed peer's endpoint is
// closed once no lease holds it, and a failure UCX reports before the
// endpoint is recorded still counts.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tcp_only.h"
#include "transport/peer_endpoints.h"
#include "transport/ucx_handles.h"
#include "transport/ucx_status.h"

namespace sray::transport {
namespace {

struct Failures {
  std::mutex mutex;
  std::vector<std::string> messages;
  std::size_t count() {
    std::lock_guard lock(mutex);
    return messages.size();
  }
};

PeerEndpoints::Peers PeersAt(std::vector<std::byte> address, Failures& failures) {
  return {.resolve_address = [address](std::uint32_t) -> Result<Bytes> { return address; },
          .alive = {},
          .describe = [](std::uint32_t rank) { return "rank " + std::to_string(rank); },
          .on_failure =
              [&failures](std::uint32_t, const Status& failure) {
                std::lock_guard lock(failures.mutex);
                failures.messages.push_back(failure.message());
              },
          .long_operations = nullptr,
          .after_connect = {}};
}

// Endpoints of one worker to another of this process (any rank resolves
// to it).
class PeerEndpointsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto context = UcxContext::Create("");
    ASSERT_TRUE(context.ok()) << context.status().message();
    auto ours = UcxWorker::Create(*context);
    ASSERT_TRUE(ours.ok()) << ours.status().message();
    auto peer = UcxWorker::Create(*context);
    ASSERT_TRUE(peer.ok()) << peer.status().message();
    peer_ = *peer;
    auto address = peer_->Address(false);
    ASSERT_TRUE(address.ok()) << address.status().message();
    endpoints_ = std::make_unique<PeerEndpoints>(*ours, PeersAt(*address, failures_));
  }

  Failures failures_;
  std::shared_ptr<UcxWorker> peer_;
  std::unique_ptr<PeerEndpoints> endpoints_;  // before peer_ ends
};

TEST_F(PeerEndpointsTest, AFailedPeersEndpointIsClosedOnceItsLastLeaseIsBack) {
  auto lease = endpoints_->For(3);
  ASSERT_TRUE(lease.ok()) << lease.status().message();
  std::weak_ptr<UcxEndpoint> watched = *lease;
  endpoints_->MarkFailed(3, Status::Unavailable("rank 3 is gone"));
  EXPECT_FALSE(endpoints_->For(3).ok()) << "a failed peer's endpoint was handed out again";
  endpoints_->CloseRetired();
  EXPECT_FALSE(watched.expired()) << "the endpoint was closed while a lease held it";
  lease = Status::Unavailable("given back");
  endpoints_->CloseRetired();
  EXPECT_TRUE(watched.expired()) << "the failed peer's endpoint stayed open";
}

// Replies go out on the endpoint UCX gave with each request, which UCX may
// have matched with this side's own endpoint to the requester: once that
// was closed, replies to its rank are dropped, others go on.
TEST_F(PeerEndpointsTest, RepliesToARankWhoseEndpointWasClosedAreDropped) {
  ASSERT_TRUE(endpoints_->For(3).ok());
  ASSERT_TRUE(endpoints_->For(4).ok());
  int sent = 0;
  EXPECT_TRUE(endpoints_->UnlessClosed(3, [&] { ++sent; }));
  endpoints_->MarkFailed(3, Status::Unavailable("rank 3 is gone"));
  // Failed, but its endpoint not closed yet: a reply still goes.
  EXPECT_TRUE(endpoints_->UnlessClosed(3, [&] { ++sent; }));
  endpoints_->CloseRetired();
  EXPECT_FALSE(endpoints_->UnlessClosed(3, [&] { ++sent; }));
  EXPECT_TRUE(endpoints_->UnlessClosed(4, [&] { ++sent; }));
  EXPECT_EQ(sent, 3);
}

// A fenced peer's endpoint stays open, so that the fenced process is
// answered (and learns it is out of the job) when it asks, until a caller
// whose request to it cannot end otherwise has it closed.
TEST_F(PeerEndpointsTest, AFencedPeersEndpointIsClosedOnlyWhenAskedTo) {
  std::weak_ptr<UcxEndpoint> fenced;
  std::weak_ptr<UcxEndpoint> healthy;
  {
    auto lease = endpoints_->For(5);
    ASSERT_TRUE(lease.ok()) << lease.status().message();
    fenced = *lease;
    lease = endpoints_->For(9);
    ASSERT_TRUE(lease.ok()) << lease.status().message();
    healthy = *lease;
  }
  endpoints_->Fence(4, 6, Status::PermissionDenied("node 2 was declared lost"));
  endpoints_->CloseRetired();
  EXPECT_FALSE(fenced.expired()) << "fencing closed the endpoint";
  auto refused = endpoints_->For(5);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("declared lost"));

  endpoints_->CloseIfFailed(5);
  endpoints_->CloseIfFailed(9);
  endpoints_->CloseRetired();
  EXPECT_TRUE(fenced.expired()) << "the fenced peer's endpoint stayed open";
  EXPECT_FALSE(healthy.expired()) << "a healthy peer's endpoint was closed";
}

// UCX may report an endpoint failed between ucp_ep_create returning and
// the endpoint being recorded: its error callback then found no endpoint of
// that peer and recorded nothing, and every later send failed on its own
// while the peer never counted as failed.
TEST(PeerEndpointsOverTcp, AFailureReportedBeforeTheEndpointIsRecordedStillCounts) {
  std::shared_ptr<UcxContext> context;
  std::shared_ptr<UcxContext> other_context;
  {
    sray::testing::TcpOnlyWhileStarting tcp_only;
    auto made = UcxContext::Create("");
    ASSERT_TRUE(made.ok()) << made.status().message();
    context = *made;
    auto other = UcxContext::Create("");
    ASSERT_TRUE(other.ok()) << other.status().message();
    other_context = *other;
  }
  auto ours = UcxWorker::Create(context);
  ASSERT_TRUE(ours.ok()) << ours.status().message();
  auto peer = UcxWorker::Create(other_context);
  ASSERT_TRUE(peer.ok()) << peer.status().message();
  auto address = (*peer)->Address(false);
  ASSERT_TRUE(address.ok()) << address.status().message();
  Failures failures;
  auto peers = PeersAt(*address, failures);
  const ucp_worker_h worker = (*ours)->handle();
  // Between the connect and the recording, the peer ends (its sockets
  // close before it ever answered) and UCX gets to report the broken
  // connection, as the progress thread could at that moment.
  std::shared_ptr<UcxWorker> ending = std::move(peer).value();
  peers.after_connect = [worker, &failures, &ending] {
    UcxLogCapture quiet;  // UCX's lines about the refused reconnects
    ending.reset();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (failures.count() == 0 && std::chrono::steady_clock::now() < deadline) {
      ucp_worker_progress(worker);
    }
  };
  PeerEndpoints endpoints(*ours, std::move(peers));

  auto endpoint = endpoints.For(2);
  ASSERT_EQ(failures.count(), 1U)
      << "UCX reported no failure of the connection to an ended worker: "
      << (endpoint.ok() ? "connected" : endpoint.status().message());
  EXPECT_FALSE(endpoint.ok()) << "the failed endpoint was handed out";
  EXPECT_TRUE(endpoints.HasFailed(2));
  EXPECT_FALSE(endpoints.FailureOf(2).ok());
  EXPECT_TRUE(endpoints.AnyPeerFailed());
  // The failure is reported once more, now that it is recorded, so that
  // what listens for failed peers (which asks HasFailed) hears of it.
  endpoints.CloseRetired();
  ASSERT_EQ(failures.count(), 2U);
  EXPECT_THAT(failures.messages[1], ::testing::HasSubstr("rank 2 is unreachable"));
}

}  // namespace
}  // namespace sray::transport
