#pragma once

// One package of a conda environment, as the formats conda writes describe
// it (conda-meta records, explicit files, environment.yml, conda-lock.yml),
// and the spec a user wrote for it.
//
// Thread-safety: plain values.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace sray::envs {

enum class Manager { kConda, kPip };

struct Package {
  Manager manager = Manager::kConda;
  std::string name;     // conda names are lower case; pip names normalised (PEP 503)
  std::string version;  // empty: any (a spec without one)
  std::string build;    // empty: any
  std::string channel;  // "conda-forge", a channel URL, or "pypi"
  std::string subdir;   // "linux-64", "noarch"; empty when unknown
  std::string md5;      // hex, lower case; empty when unknown
  std::string sha256;   // hex, lower case; empty when unknown
  // For specs: how the version is constrained. "=" (conda's prefix match:
  // 3.11 matches 3.11.5), "==" exact, ">=", "<=", ">", "<", "!=".
  std::string version_operator = "==";
};

// Where a list of packages came from, and whether it names every package of
// the environment (an export with builds, an explicit file, a lock, a
// prefix) or only what the user asked for (--from-history, --no-builds).
struct PackageList {
  std::vector<Package> packages;
  bool complete = true;
  // False for formats that cannot express pip packages (conda's explicit
  // file): the pip packages of an environment are then not compared.
  bool lists_pip = true;
  std::string source;  // the file or prefix, for messages
  // environment.yml extras, kept for activation.
  std::string name;
  std::vector<std::pair<std::string, std::string>> variables;
};

// "pip" names compare after PEP 503 normalisation; conda names lower-cased.
std::string NormalizeName(Manager manager, std::string_view name);

// Splits a conda package file name ("python-3.11.5-hab00c5b_0_cpython.conda")
// into name, version and build.
Result<Package> PackageFromFileName(std::string_view file_name);

// A package's URL ("https://conda.anaconda.org/conda-forge/linux-64/x-1-0.conda")
// into channel, subdir, name, version and build.
Result<Package> PackageFromUrl(std::string_view url);

// conda's match spec as environment.yml writes it: "numpy", "numpy=1.26",
// "python=3.11.5=hab00c5b_0_cpython", "conda-forge::numpy>=1.20",
// "numpy 1.26.0 py311h_0".
Result<Package> ParseCondaSpec(std::string_view spec);

// pip's requirement as environment.yml's pip section writes it:
// "requests==2.31.0", "requests>=2", "requests".
Result<Package> ParsePipSpec(std::string_view spec);

// Does `installed` satisfy `wanted`'s version constraint?
bool VersionSatisfies(const Package& wanted, std::string_view installed);

std::string_view ManagerName(Manager manager);

}  // namespace sray::envs
