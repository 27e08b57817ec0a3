// libFuzzer target for the node-setup codec (jobsetup/node_setup_codec): the
// bytes a job-user child hands back to a root slurmstepd. Anything must
// decode or fail with a Status naming the problem, never crash; what decodes
// must encode to bytes that decode to the same encoding.
//   build-fuzz/tests/sray_node_setup_fuzzer tests/fuzz/corpus/node_setup

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "jobsetup/node_setup_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto decoded = sray::jobsetup::DecodeNodeSetupResult(bytes);
  if (!decoded.ok() && decoded.status().message().empty()) std::abort();
  // A decoded failure of the child is itself a value to carry on.
  const std::string encoded = sray::jobsetup::EncodeNodeSetupResult(decoded);
  auto again = sray::jobsetup::DecodeNodeSetupResult(encoded);
  if (decoded.ok() != again.ok()) std::abort();
  if (sray::jobsetup::EncodeNodeSetupResult(again) != encoded) std::abort();
  return 0;
}
