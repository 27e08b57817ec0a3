#include "envs/verify.h"

#include <map>
#include <utility>

namespace sray::envs {
namespace {

std::string Label(const Package& package) {
  return std::string(ManagerName(package.manager)) + " package " + package.name;
}

std::string Pinned(const Package& package) {
  std::string text = package.version.empty() ? std::string("any version") : package.version;
  if (!package.build.empty()) text += " " + package.build;
  return text;
}

}  // namespace

Differences Compare(const PackageList& spec, const PackageList& installed) {
  std::map<std::pair<Manager, std::string>, const Package*> present;
  for (const auto& package : installed.packages)
    present[{package.manager, package.name}] = &package;
  Differences differences;
  for (const auto& wanted : spec.packages) {
    auto found = present.find({wanted.manager, wanted.name});
    if (found == present.end()) {
      differences.missing.push_back(wanted);
      continue;
    }
    const Package& have = *found->second;
    present.erase(found);
    if (!VersionSatisfies(wanted, have.version)) {
      differences.mismatched.push_back({wanted, have, "version"});
    } else if (!wanted.build.empty() && wanted.build != have.build) {
      differences.mismatched.push_back({wanted, have, "build"});
    } else if (!wanted.sha256.empty() && !have.sha256.empty() && wanted.sha256 != have.sha256) {
      differences.mismatched.push_back({wanted, have, "sha256"});
    } else if (!wanted.md5.empty() && !have.md5.empty() && wanted.md5 != have.md5) {
      differences.mismatched.push_back({wanted, have, "md5"});
    }
  }
  for (const auto& [key, package] : present) {
    if (package->manager == Manager::kPip && !spec.lists_pip) {
      differences.not_compared.push_back(*package);
    } else if (spec.complete) {
      differences.extra.push_back(*package);
    }
  }
  return differences;
}

std::vector<std::string> Describe(const Differences& differences) {
  std::vector<std::string> lines;
  for (const auto& package : differences.missing) {
    lines.push_back("missing: " + Label(package) + " " + Pinned(package));
  }
  for (const auto& package : differences.extra) {
    lines.push_back("extra: " + Label(package) + " " + Pinned(package));
  }
  for (const auto& mismatch : differences.mismatched) {
    std::string wanted;
    std::string found;
    if (mismatch.field == "version") {
      wanted = mismatch.wanted.version_operator + mismatch.wanted.version;
      found = mismatch.found.version;
    } else if (mismatch.field == "build") {
      wanted = mismatch.wanted.build;
      found = mismatch.found.build;
    } else if (mismatch.field == "sha256") {
      wanted = mismatch.wanted.sha256;
      found = mismatch.found.sha256;
    } else {
      wanted = mismatch.wanted.md5;
      found = mismatch.found.md5;
    }
    lines.push_back(mismatch.field + " of " + Label(mismatch.wanted) + ": wanted " + wanted +
                    ", found " + found);
  }
  return lines;
}

}  // namespace sray::envs
