#include "core/environment_check.h"

#include <cstdint>
#include <map>
#include <sstream>

namespace sray::core {
namespace {

// "MANAGER NAME" -> "VERSION BUILD CHANNEL SUBDIR CHECKSUM", skipping comments.
std::map<std::string, std::string> Packages(const std::string& lock) {
  std::map<std::string, std::string> packages;
  std::istringstream lines(lock);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line.front() == '#') continue;
    const auto first = line.find(' ');
    const auto second = first == std::string::npos ? std::string::npos : line.find(' ', first + 1);
    if (second == std::string::npos) continue;
    packages[line.substr(0, second)] = line.substr(second + 1);
  }
  return packages;
}

}  // namespace

std::vector<std::string> LockDifferences(const std::string& reference, std::uint32_t reference_node,
                                         const std::string& other, std::uint32_t other_node) {
  const auto expected = Packages(reference);
  const auto found = Packages(other);
  const std::string here = " on node " + std::to_string(other_node);
  const std::string there = " on node " + std::to_string(reference_node);
  std::vector<std::string> differences;
  for (const auto& [package, details] : expected) {
    auto match = found.find(package);
    if (match == found.end()) {
      differences.push_back(package + ": missing" + here + ", " + details + there);
    } else if (match->second != details) {
      differences.push_back(package + ": " + match->second + here + ", " + details + there);
    }
  }
  for (const auto& [package, details] : found) {
    if (!expected.contains(package)) differences.push_back(package + ": " + details + here + ", missing" + there);
  }
  if (differences.empty() && reference != other) {
    differences.push_back("the locks differ (" + std::to_string(reference.size()) + " and " +
                          std::to_string(other.size()) + " bytes) but list the same packages");
  }
  return differences;
}

}  // namespace sray::core
