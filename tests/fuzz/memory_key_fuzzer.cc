// libFuzzer target for the remote memory key (transport/memory_key): a pull's
// key arrives inside a message from another process (PullSource), so any
// bytes must decode or fail with a message, never crash, and what decodes
// must encode to the same bytes (one spelling per key).
//   cmake --preset fuzz && cmake --build --preset fuzz --target sray_memory_key_fuzzer
//   build-fuzz/tests/sray_memory_key_fuzzer -max_total_time=60

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "transport/memory_key.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto bytes = std::as_bytes(std::span(data, size));
  auto decoded = sray::transport::DecodeMemoryKey(bytes);
  if (!decoded.ok()) {
    if (decoded.status().message().empty()) std::abort();
    return 0;
  }
  const auto encoded = sray::transport::EncodeMemoryKey(*decoded);
  if (!std::equal(encoded.begin(), encoded.end(), bytes.begin(), bytes.end())) std::abort();
  return 0;
}
