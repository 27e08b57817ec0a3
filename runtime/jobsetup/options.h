#pragma once

// The `--ray-cluster=key=value,...` option set: its schema, the parser for the
// comma-separated list, and value validation. One schema serves the SPANK
// plugin, `sray run`, `sray config check` and the admin/user TOML files, so a
// key means the same thing everywhere.
//
// Thread-safety: everything here is a pure function over immutable data.

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace sray::jobsetup {

enum class OptionKind {
  kAbsolutePath,   // a normalised absolute path
  kChoice,         // one of OptionSpec::choices
  kByteSize,       // bytes, with an optional K, M, G or T suffix (powers of 1024)
  kResourceList,   // NAME:AMOUNT;NAME:AMOUNT, e.g. GPU:2;ssd:1
  kListenAddress,  // off, or HOST:PORT (port 0: any free one)
  kCount,          // a whole number, 0 or more
};

struct OptionSpec {
  std::string_view key;
  OptionKind kind;
  // Exported to every task under this name once resolved.
  std::string_view environment_variable;
  std::string_view default_value;  // empty: no default
  std::span<const std::string_view> choices;
  std::string_view help;
  // `config` names the user's own file, so it cannot appear inside a file.
  bool command_line_only = false;
  // The largest value a kCount option takes (its unit's largest meaningful
  // value; beyond it the runtime's clocks would overflow).
  std::uint64_t maximum = std::numeric_limits<std::uint64_t>::max();
};

std::span<const OptionSpec> OptionSchema();
const OptionSpec* FindOption(std::string_view key);
// "config, log_level, tmpdir": for error messages that list what is accepted.
std::string AcceptedKeys();

// One `key=value` together with where it came from ("--ray-cluster",
// "/etc/sray/sray.toml:3"), so an error can point at the culprit.
struct OptionAssignment {
  std::string key;
  std::string value;
  std::string source;
};

// Parses "key=value,key=value". An empty text is an empty list. Keys must be in
// the schema and appear once; values are validated and canonicalised.
Result<std::vector<OptionAssignment>> ParseOptionList(std::string_view text,
                                                      std::string_view source);

// Validates `value` for `spec` and returns its canonical spelling.
Result<std::string> CanonicalValue(const OptionSpec& spec, std::string_view value,
                                   std::string_view source);

}  // namespace sray::jobsetup
