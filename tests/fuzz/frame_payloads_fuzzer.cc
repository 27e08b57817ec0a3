// libFuzzer target for the payloads inside a frame that a process of the job
// sends (after its header and token were checked): a batch of one-way
// messages (transport/message_batch) and an error response (transport/frame).
// Any bytes must decode or fail with a message, never crash: a batch that
// fails delivers nothing, one that decodes re-encodes to the same bytes, and
// an error response never reads as success.
//   cmake --preset fuzz && cmake --build --preset fuzz --target sray_frame_payloads_fuzzer
//   build-fuzz/tests/sray_frame_payloads_fuzzer -max_total_time=60

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "transport/frame.h"
#include "transport/message_batch.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto bytes = std::as_bytes(std::span(data, size));

  sray::transport::MessageBatch again;
  const sray::Status batch = sray::transport::ForEachBatchedMessage(
      bytes, [&](std::uint32_t method, std::span<const std::byte> message) {
        again.Append(method, message);
      });
  if (!batch.ok()) {
    if (batch.message().empty() || again.count() != 0) std::abort();
  } else {
    const auto encoded = again.Take();
    if (!std::equal(encoded.begin(), encoded.end(), bytes.begin(), bytes.end())) std::abort();
  }

  const sray::Status error = sray::transport::DecodeErrorResponse(bytes);
  if (error.ok()) std::abort();
  if (!bytes.empty() &&
      static_cast<std::uint8_t>(error.code()) == std::to_integer<std::uint8_t>(bytes[0])) {
    const auto encoded = sray::transport::EncodeErrorResponse(error);
    if (!std::equal(encoded.begin(), encoded.end(), bytes.begin(), bytes.end())) std::abort();
  }
  return 0;
}
