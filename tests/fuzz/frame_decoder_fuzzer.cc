// libFuzzer target for the frame decoder: any bytes a peer can send must
// decode cleanly or fail with a Status, never crash, and whatever decodes
// must survive an encode/decode round trip unchanged.
//   cmake --preset fuzz && cmake --build --preset fuzz --target sray_frame_decoder_fuzzer
//   build-fuzz/tests/sray_frame_decoder_fuzzer -max_total_time=60

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "transport/frame.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto bytes = std::as_bytes(std::span(data, size));
  auto decoded = sray::transport::DecodeFrameHeader(bytes);
  if (!decoded.ok()) {
    if (decoded.status().message().empty()) std::abort();
    return 0;
  }
  const auto encoded = sray::transport::EncodeFrameHeader(*decoded);
  auto again = sray::transport::DecodeFrameHeader(encoded);
  if (!again.ok() || again->kind != decoded->kind || again->source_rank != decoded->source_rank ||
      again->method != decoded->method || again->request_id != decoded->request_id ||
      !sray::transport::TokensMatch(again->token, decoded->token)) {
    std::abort();
  }
  return 0;
}
