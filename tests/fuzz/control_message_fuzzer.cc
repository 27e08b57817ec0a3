// libFuzzer target for the runtime's control messages (core/protocol.h):
// the first byte picks a message type, the rest is what a peer sent. Any
// bytes must decode or fail with a Status naming the problem, never crash;
// whatever decodes must encode to bytes that decode to the same encoding.
//   cmake --preset fuzz && cmake --build --preset fuzz --target sray_control_message_fuzzer
//   build-fuzz/tests/sray_control_message_fuzzer tests/fuzz/corpus/control_message

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "core/protocol.h"

namespace {

using namespace sray::core;

template <typename Message>
void RoundTrip(std::span<const std::byte> bytes) {
  auto decoded = Decode<Message>(bytes, "fuzzed");
  if (!decoded.ok()) {
    if (decoded.status().message().empty()) std::abort();
    return;
  }
  const sray::transport::Bytes encoded = Encode(*decoded);
  auto again = Decode<Message>(encoded, "re-encoded");
  if (!again.ok() || Encode(*again) != encoded) std::abort();
}

using Decoder = void (*)(std::span<const std::byte>);

// Every message type that crosses the transport (protocol.h's Method list).
constexpr Decoder kDecoders[] = {
    RoundTrip<NodeDescription>,    RoundTrip<ClusterView>,        RoundTrip<ResourceUpdate>,
    RoundTrip<TaskSpec>,           RoundTrip<TaskOutcome>,        RoundTrip<WorkerRegistration>,
    RoundTrip<ObjectRequest>,      RoundTrip<ObjectPath>,         RoundTrip<PullSource>,
    RoundTrip<FreeObject>,         RoundTrip<OrphanedResult>,     RoundTrip<BorrowerChange>,
    RoundTrip<ObjectStatus>,       RoundTrip<StatusRequest>,      RoundTrip<ObjectId>,
    RoundTrip<StoreUsage>,         RoundTrip<NodeStatus>,         RoundTrip<WorkerLogsRequest>,
    RoundTrip<WorkerLogs>,         RoundTrip<ActorCreation>,      RoundTrip<ActorInfo>,
    RoundTrip<ActorLookup>,        RoundTrip<ActorWait>,          RoundTrip<ActorChanged>,
    RoundTrip<ActorKill>,          RoundTrip<ActorDeath>,         RoundTrip<PlacementGroupCreation>,
    RoundTrip<PlacementGroupInfo>, RoundTrip<PlacementGroupWait>, RoundTrip<PlacementGroupRemoval>,
    RoundTrip<ActorCallTally>,     RoundTrip<NodeLost>,           RoundTrip<OwnerGone>,
    RoundTrip<WorkerEndReply>,     RoundTrip<TaskMoved>,
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto pick = static_cast<std::size_t>(data[0]) % std::size(kDecoders);
  kDecoders[pick](std::as_bytes(std::span(data + 1, size - 1)));
  return 0;
}
