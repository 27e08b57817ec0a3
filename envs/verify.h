#pragma once

// Compares what an environment should hold (a spec) with what a prefix
// holds: packages missing from the prefix, extra in it (only against a
// complete spec: a --from-history file names what the user asked for, not
// its dependencies), and packages whose version, build or checksum differ.
// Only what the spec's format can express is compared: against an explicit
// file the prefix's pip packages are listed as not compared.
//
// Thread-safety: pure functions.

#include <string>
#include <vector>

#include "envs/package.h"

namespace sray::envs {

struct Mismatch {
  Package wanted;
  Package found;
  std::string field;  // "version", "build", "md5" or "sha256"
};

struct Differences {
  std::vector<Package> missing;
  std::vector<Package> extra;
  std::vector<Mismatch> mismatched;
  // Installed pip packages left alone because the spec's format cannot list
  // them (PackageList::lists_pip); not a difference.
  std::vector<Package> not_compared;
  [[nodiscard]] bool empty() const {
    return missing.empty() && extra.empty() && mismatched.empty();
  }
};

Differences Compare(const PackageList& spec, const PackageList& installed);
// One line per difference, e.g. "build of conda package numpy: wanted
// py311h_0, found py311h_1".
std::vector<std::string> Describe(const Differences& differences);

}  // namespace sray::envs
