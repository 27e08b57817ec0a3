// libFuzzer target for wire-up through srun (wire/rendezvous_codec): what
// srun's rendezvous reads from anyone who reaches its port (contributions),
// what a rank reads back from srun (answers, each rank's values), and the
// SRAY_RENDEZVOUS variable. Anything must decode, wait for more bytes, or
// fail with a Status naming the problem, never crash; what decodes must
// encode to the same bytes.
//   build-fuzz/tests/sray_rendezvous_fuzzer tests/fuzz/corpus/rendezvous

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <string_view>

#include "wire/rendezvous_codec.h"

namespace rendezvous = sray::wire::rendezvous;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto bytes = std::as_bytes(std::span(data, size));

  auto token = rendezvous::ContributionToken(bytes);
  if (!token.ok() && token.status().message().empty()) std::abort();

  auto contribution = rendezvous::DecodeContribution(bytes);
  // Whatever decodes as a contribution starts with its token.
  if (contribution.ok() && contribution->has_value() &&
      (!token.ok() || !token->has_value() || **token != (*contribution)->token)) {
    std::abort();
  }
  if (!contribution.ok() && contribution.status().message().empty()) std::abort();
  if (contribution.ok() && contribution->has_value()) {
    const auto encoded = rendezvous::EncodeContribution(**contribution);
    if (!std::equal(encoded.begin(), encoded.end(), bytes.begin(), bytes.end())) std::abort();
  }

  // The first byte picks the job size a rank would expect.
  const std::uint32_t ranks = size == 0 ? 1 : static_cast<std::uint32_t>(data[0] % 8);
  auto answer = rendezvous::DecodeAnswer(bytes, ranks);
  if (!answer.ok() && answer.status().message().empty()) std::abort();
  if (answer.ok() && answer->has_value() && !(*answer)->refusal) {
    const auto encoded = rendezvous::EncodeTable((*answer)->values);
    if (!std::equal(encoded.begin(), encoded.end(), bytes.begin(), bytes.end())) std::abort();
  }

  auto values = rendezvous::DecodeValues(bytes);
  if (!values.ok() && values.status().message().empty()) std::abort();
  if (values.ok()) {
    const auto encoded = rendezvous::EncodeValues(*values);
    if (!std::equal(encoded.begin(), encoded.end(), bytes.begin(), bytes.end())) std::abort();
  }

  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto invitation = rendezvous::ParseInvitation(text);
  if (invitation.ok()) {
    auto again = rendezvous::ParseInvitation(rendezvous::FormatInvitation(*invitation));
    if (!again.ok() || again->step != invitation->step || again->port != invitation->port ||
        again->token != invitation->token) {
      std::abort();
    }
  }
  return 0;
}
