#include "envs/package.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace sray::envs {
namespace {

std::string Lower(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char character) { return static_cast<char>(std::tolower(character)); });
  return lower;
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

constexpr std::string_view kArchiveSuffixes[] = {".tar.bz2", ".conda"};

// "1.26.0" vs "1.3": numeric components compare as numbers, others as text.
int CompareVersions(std::string_view left, std::string_view right) {
  auto next = [](std::string_view& text) {
    const auto dot = text.find_first_of(".-_+");
    std::string_view part = text.substr(0, dot);
    text = dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
    return part;
  };
  while (!left.empty() || !right.empty()) {
    const std::string_view a = next(left);
    const std::string_view b = next(right);
    unsigned long long number_a = 0;
    unsigned long long number_b = 0;
    const bool numeric_a = !a.empty() && std::from_chars(a.data(), a.data() + a.size(), number_a).ptr == a.data() + a.size();
    const bool numeric_b = !b.empty() && std::from_chars(b.data(), b.data() + b.size(), number_b).ptr == b.data() + b.size();
    if (numeric_a && numeric_b) {
      if (number_a != number_b) return number_a < number_b ? -1 : 1;
    } else if (a != b) {
      if (a.empty()) return -1;
      if (b.empty()) return 1;
      return a < b ? -1 : 1;
    }
  }
  return 0;
}

}  // namespace

std::string_view ManagerName(Manager manager) {
  return manager == Manager::kPip ? "pip" : "conda";
}

std::string NormalizeName(Manager manager, std::string_view name) {
  std::string normal = Lower(Trim(name));
  if (manager == Manager::kPip) {
    // PEP 503: runs of -, _ and . are one -.
    std::string collapsed;
    for (const char character : normal) {
      const bool separator = character == '-' || character == '_' || character == '.';
      if (separator) {
        if (collapsed.empty() || collapsed.back() != '-') collapsed += '-';
      } else {
        collapsed += character;
      }
    }
    normal = collapsed;
  }
  return normal;
}

Result<Package> PackageFromFileName(std::string_view file_name) {
  std::string_view stem = file_name;
  bool archive = false;
  for (const auto suffix : kArchiveSuffixes) {
    if (stem.ends_with(suffix)) {
      stem.remove_suffix(suffix.size());
      archive = true;
      break;
    }
  }
  const auto last = stem.rfind('-');
  const auto middle = last == std::string_view::npos ? std::string_view::npos : stem.rfind('-', last - 1);
  if (!archive || last == std::string_view::npos || middle == std::string_view::npos || middle == 0) {
    return Status::InvalidArgument("'" + std::string(file_name) +
                                   "' is not a conda package file name (NAME-VERSION-BUILD.conda "
                                   "or .tar.bz2)");
  }
  Package package;
  package.name = NormalizeName(Manager::kConda, stem.substr(0, middle));
  package.version = std::string(stem.substr(middle + 1, last - middle - 1));
  package.build = std::string(stem.substr(last + 1));
  return package;
}

Result<Package> PackageFromUrl(std::string_view url) {
  std::string_view location = url;
  std::string_view fragment;
  if (const auto hash = location.find('#'); hash != std::string_view::npos) {
    fragment = location.substr(hash + 1);
    location = location.substr(0, hash);
  }
  const auto slash = location.rfind('/');
  if (slash == std::string_view::npos) {
    return Status::InvalidArgument("'" + std::string(url) + "' is not a package URL");
  }
  auto package = PackageFromFileName(location.substr(slash + 1));
  if (!package.ok()) return package.status().WithContext("in URL '" + std::string(url) + "'");
  const std::string_view directory = location.substr(0, slash);
  const auto subdir_slash = directory.rfind('/');
  if (subdir_slash != std::string_view::npos) {
    package->subdir = std::string(directory.substr(subdir_slash + 1));
    package->channel = std::string(directory.substr(0, subdir_slash));
  }
  if (!fragment.empty()) {
    const std::string hex = Lower(fragment);
    const bool is_hex = std::all_of(hex.begin(), hex.end(), [](char character) {
      return std::isxdigit(static_cast<unsigned char>(character)) != 0;
    });
    if (!is_hex || (hex.size() != 32 && hex.size() != 64)) {
      return Status::InvalidArgument("URL '" + std::string(url) +
                                     "' ends in '#" + std::string(fragment) +
                                     "', which is neither an md5 nor a sha256 checksum");
    }
    (hex.size() == 32 ? package->md5 : package->sha256) = hex;
  }
  return package;
}

Result<Package> ParseCondaSpec(std::string_view spec) {
  std::string_view text = Trim(spec);
  if (const auto comment = text.find('#'); comment != std::string_view::npos) text = Trim(text.substr(0, comment));
  if (text.empty()) return Status::InvalidArgument("an empty package spec");
  Package package;
  if (const auto channel = text.find("::"); channel != std::string_view::npos) {
    package.channel = std::string(text.substr(0, channel));
    text = text.substr(channel + 2);
  }
  // "name version build" (conda list style) or "name=version=build".
  std::vector<std::string_view> fields;
  if (text.find(' ') != std::string_view::npos && text.find_first_of("=<>!") == std::string_view::npos) {
    while (!text.empty()) {
      const auto space = text.find(' ');
      fields.push_back(text.substr(0, space));
      text = space == std::string_view::npos ? std::string_view() : Trim(text.substr(space));
    }
  } else {
    const auto operator_at = text.find_first_of("=<>!~");
    fields.push_back(Trim(text.substr(0, operator_at)));
    if (operator_at != std::string_view::npos) {
      std::string_view rest = text.substr(operator_at);
      const auto version_at = rest.find_first_not_of("=<>!~");
      std::string op(rest.substr(0, version_at));
      if (op == "=" || op == "==" || op == ">=" || op == "<=" || op == ">" || op == "<" || op == "!=") {
        package.version_operator = op;
      } else {
        return Status::InvalidArgument("package spec '" + std::string(spec) + "' uses operator '" + op +
                                       "': use =, ==, >=, <=, >, < or !=");
      }
      rest = version_at == std::string_view::npos ? std::string_view() : rest.substr(version_at);
      const auto build_at = rest.find('=');
      fields.push_back(Trim(rest.substr(0, build_at)));
      if (build_at != std::string_view::npos) fields.push_back(Trim(rest.substr(build_at + 1)));
    }
  }
  if (fields.empty() || fields.size() > 3 || fields[0].empty()) {
    return Status::InvalidArgument("'" + std::string(spec) +
                                   "' is not a conda package spec (NAME, NAME=VERSION or "
                                   "NAME=VERSION=BUILD)");
  }
  package.name = NormalizeName(Manager::kConda, fields[0]);
  if (fields.size() > 1) {
    package.version = std::string(fields[1]);
    if (package.version.ends_with(".*")) {
      package.version.resize(package.version.size() - 2);
      package.version_operator = "=";
    }
  }
  if (fields.size() > 2) {
    package.build = std::string(fields[2]);
    if (package.version_operator == "=") package.version_operator = "==";  // builds pin exactly
  }
  if (fields.size() == 3 && fields[2].find_first_of("*?") != std::string_view::npos) {
    return Status::InvalidArgument("package spec '" + std::string(spec) +
                                   "' has a build pattern: sray compares exact builds");
  }
  return package;
}

Result<Package> ParsePipSpec(std::string_view spec) {
  std::string_view text = Trim(spec);
  if (const auto marker = text.find(';'); marker != std::string_view::npos) text = Trim(text.substr(0, marker));
  if (text.empty()) return Status::InvalidArgument("an empty pip requirement");
  if (text.starts_with("-") || text.find("://") != std::string_view::npos) {
    return Status::InvalidArgument("pip requirement '" + std::string(spec) +
                                   "' is an option or a URL: sray compares named requirements only");
  }
  Package package;
  package.manager = Manager::kPip;
  package.channel = "pypi";
  const auto operator_at = text.find_first_of("=<>!~ [");
  package.name = NormalizeName(Manager::kPip, text.substr(0, operator_at));
  if (operator_at != std::string_view::npos) {
    std::string_view rest = Trim(text.substr(operator_at));
    if (rest.starts_with("[")) {
      const auto close = rest.find(']');
      rest = close == std::string_view::npos ? std::string_view() : Trim(rest.substr(close + 1));
    }
    if (!rest.empty()) {
      if (rest.find(',') != std::string_view::npos) {
        return Status::InvalidArgument("pip requirement '" + std::string(spec) +
                                       "' has several constraints: pin one version with ==");
      }
      const auto version_at = rest.find_first_not_of("=<>!~");
      // "numpy>=" threw std::out_of_range out of this function
      // (tests/fuzz/environment_readers_fuzzer).
      if (version_at == std::string_view::npos) {
        return Status::InvalidArgument("pip requirement '" + std::string(spec) +
                                       "' has an operator but no version: write e.g. numpy==1.26.0");
      }
      const std::string op(rest.substr(0, version_at));
      if (op != "==" && op != ">=" && op != "<=" && op != ">" && op != "<" && op != "!=") {
        return Status::InvalidArgument("pip requirement '" + std::string(spec) + "' uses operator '" +
                                       op + "': use ==, >=, <=, >, < or !=");
      }
      package.version_operator = op;
      package.version = std::string(Trim(rest.substr(version_at)));
    }
  }
  if (package.name.empty()) {
    return Status::InvalidArgument("'" + std::string(spec) + "' is not a pip requirement");
  }
  return package;
}

bool VersionSatisfies(const Package& wanted, std::string_view installed) {
  if (wanted.version.empty()) return true;
  const std::string& op = wanted.version_operator;
  if (op == "=") {
    return installed == wanted.version ||
           (installed.starts_with(wanted.version) && installed.size() > wanted.version.size() &&
            installed[wanted.version.size()] == '.');
  }
  const int order = CompareVersions(installed, wanted.version);
  if (op == "==") return installed == wanted.version || order == 0;
  if (op == "!=") return order != 0;
  if (op == ">=") return order >= 0;
  if (op == "<=") return order <= 0;
  if (op == ">") return order > 0;
  if (op == "<") return order < 0;
  return false;
}

}  // namespace sray::envs
