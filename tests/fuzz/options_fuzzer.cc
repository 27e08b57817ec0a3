// libFuzzer target for sray's options: `--ray-cluster=` strings (and the
// SPANK plugstack arguments, which take the same list), the TOML config
// files, and each option's value check. The first byte picks which. Anything
// must parse or fail with a Status naming the problem, never crash; a list
// that parses must parse again, unchanged, from its canonical spelling.
//   build-fuzz/tests/sray_options_fuzzer tests/fuzz/corpus/options

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_files.h"
#include "jobsetup/config_file.h"
#include "jobsetup/options.h"

namespace {

using sray::jobsetup::OptionAssignment;

void ExpectMessage(const sray::Status& status) {
  if (!status.ok() && status.message().empty()) std::abort();
}

void OptionList(std::string_view text) {
  auto parsed = sray::jobsetup::ParseOptionList(text, "--ray-cluster");
  ExpectMessage(parsed.status());
  if (!parsed.ok()) return;
  // Values never hold a bare comma-separated key=value, so the canonical
  // list reads back as itself.
  std::string canonical;
  for (const OptionAssignment& assignment : *parsed) {
    if (!canonical.empty()) canonical += ',';
    canonical += assignment.key + '=' + assignment.value;
  }
  auto again = sray::jobsetup::ParseOptionList(canonical, "--ray-cluster");
  if (!again.ok() || again->size() != parsed->size()) std::abort();
  for (std::size_t index = 0; index < parsed->size(); ++index) {
    if ((*again)[index].key != (*parsed)[index].key ||
        (*again)[index].value != (*parsed)[index].value) {
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 3) {
    case 0: OptionList(rest); break;
    case 1: {
      const auto path = sray::fuzz::WriteInput("sray.toml", data + 1, size - 1);
      ExpectMessage(sray::jobsetup::ReadConfigFile(path).status());
      break;
    }
    default: {
      if (rest.empty()) return 0;
      const auto schema = sray::jobsetup::OptionSchema();
      const auto& spec = schema[static_cast<unsigned char>(rest[0]) % schema.size()];
      auto value = sray::jobsetup::CanonicalValue(spec, rest.substr(1), "fuzz");
      ExpectMessage(value.status());
      if (value.ok()) {
        // The canonical spelling is itself accepted, as itself.
        auto again = sray::jobsetup::CanonicalValue(spec, *value, "fuzz");
        if (!again.ok() || *again != *value) std::abort();
      }
      break;
    }
  }
  return 0;
}
