#include "envs/readers.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "envs/lock.h"

namespace sray::envs {
namespace {

namespace fs = std::filesystem;

Status InFile(const fs::path& file, const std::string& what) {
  return Status::InvalidArgument(file.string() + ": " + what);
}

std::string Text(const YAML::Node& node) {
  return node.IsDefined() && node.IsScalar() ? node.as<std::string>() : std::string();
}

// conda-meta records name their channel as a URL or a short name; keep the
// short name where the URL is a well-known host's.
std::string ShortChannel(std::string channel) {
  for (const std::string host :
       {"https://conda.anaconda.org/", "https://repo.anaconda.com/pkgs/"}) {
    if (channel.starts_with(host)) channel = channel.substr(host.size());
  }
  for (const std::string subdir :
       {"/linux-64", "/noarch", "/linux-aarch64", "/osx-64", "/osx-arm64", "/win-64"}) {
    if (channel.ends_with(subdir)) channel.resize(channel.size() - subdir.size());
  }
  return channel;
}

Result<Package> PackageFromRecord(const fs::path& file) {
  auto text = ReadWholeFile(file);
  if (!text.ok()) return text.status();
  nlohmann::json record;
  try {
    record = nlohmann::json::parse(*text);
  } catch (const nlohmann::json::exception& error) {
    return InFile(file, std::string("malformed JSON: ") + error.what() +
                            ": the prefix's conda-meta is damaged; recreate the environment");
  }
  if (!record.is_object()) return InFile(file, "not a JSON object: not a conda-meta record");
  auto field = [&](const char* key) -> std::string {
    auto found = record.find(key);
    return found != record.end() && found->is_string() ? found->get<std::string>() : std::string();
  };
  Package package;
  package.name = NormalizeName(Manager::kConda, field("name"));
  package.version = field("version");
  package.build = field("build");
  package.subdir = field("subdir");
  package.md5 = field("md5");
  package.sha256 = field("sha256");
  package.channel = ShortChannel(field("channel"));
  if (package.name.empty() || package.version.empty() || package.build.empty()) {
    return InFile(file, "lacks name, version or build: not a conda-meta record");
  }
  if (package.channel.empty()) {
    const std::string url = field("url");
    if (auto from_url = PackageFromUrl(url); from_url.ok())
      package.channel = ShortChannel(from_url->channel);
  }
  return package;
}

// pip's installed distributions: NAME-VERSION.dist-info directories in
// site-packages; those conda installed (INSTALLER says conda) are conda's.
void AddPipPackages(const fs::path& prefix, PackageList& list) {
  std::error_code error;
  const fs::path lib = prefix / "lib";
  if (!fs::is_directory(lib, error)) return;
  for (const auto& python : fs::directory_iterator(lib, error)) {
    if (!python.path().filename().string().starts_with("python")) continue;
    const fs::path site = python.path() / "site-packages";
    if (!fs::is_directory(site, error)) continue;
    for (const auto& entry : fs::directory_iterator(site, error)) {
      const std::string name = entry.path().filename().string();
      if (!name.ends_with(".dist-info")) continue;
      std::ifstream installer(entry.path() / "INSTALLER");
      std::string tool;
      std::getline(installer, tool);
      if (tool == "conda") continue;
      const std::string stem = name.substr(0, name.size() - std::string(".dist-info").size());
      const auto dash = stem.find('-');
      if (dash == std::string::npos) continue;
      Package package;
      package.manager = Manager::kPip;
      package.channel = "pypi";
      package.name = NormalizeName(Manager::kPip, stem.substr(0, dash));
      package.version = stem.substr(dash + 1);
      list.packages.push_back(std::move(package));
    }
  }
}

Result<YAML::Node> LoadYaml(const fs::path& file) {
  auto text = ReadWholeFile(file);
  if (!text.ok()) return text.status();
  try {
    return YAML::Load(*text);
  } catch (const YAML::Exception& error) {
    return InFile(file, std::string("malformed YAML: ") + error.what());
  }
}

void SortPackages(PackageList& list) {
  std::sort(list.packages.begin(), list.packages.end(),
            [](const Package& left, const Package& right) {
              return std::tie(left.manager, left.name) < std::tie(right.manager, right.name);
            });
}

Status CheckDuplicates(const PackageList& list) {
  for (std::size_t index = 1; index < list.packages.size(); ++index) {
    const auto& previous = list.packages[index - 1];
    const auto& current = list.packages[index];
    if (previous.manager == current.manager && previous.name == current.name) {
      return InFile(list.source, "names " + std::string(ManagerName(current.manager)) +
                                     " package '" + current.name + "' twice");
    }
  }
  return Status::Ok();
}

Result<PackageList> Finish(PackageList list) {
  SortPackages(list);
  if (Status duplicates = CheckDuplicates(list); !duplicates.ok()) return duplicates;
  return list;
}

}  // namespace

Result<PackageList> ReadPrefix(const fs::path& prefix) {
  std::error_code error;
  const fs::path meta = prefix / "conda-meta";
  if (!fs::is_directory(prefix, error)) {
    return Status::NotFound(prefix.string() +
                            " is not a directory: give the path of an existing "
                            "conda environment (its prefix)");
  }
  if (!fs::is_directory(meta, error)) {
    return Status::NotFound(prefix.string() +
                            " has no conda-meta directory: it is not a conda "
                            "environment (create one with `sray env create SPEC`)");
  }
  PackageList list;
  list.source = prefix.string();
  list.complete = true;
  list.name = prefix.filename().string();
  for (const auto& entry : fs::directory_iterator(meta, error)) {
    if (entry.path().extension() != ".json") continue;
    auto package = PackageFromRecord(entry.path());
    if (!package.ok()) return package.status();
    list.packages.push_back(std::move(package).value());
  }
  if (error) return Status::IoError("cannot list " + meta.string() + ": " + error.message());
  AddPipPackages(prefix, list);
  return Finish(std::move(list));
}

namespace {

Result<PackageList> ReadEnvironmentYamlUnguarded(const fs::path& file) {
  auto loaded = LoadYaml(file);
  if (!loaded.ok()) return loaded.status();
  const YAML::Node document = std::move(loaded).value();
  if (!document.IsMap()) return InFile(file, "not a YAML mapping: not an environment.yml");
  static const std::vector<std::string> kKnown = {"name", "channels", "dependencies", "variables",
                                                  "prefix"};
  for (const auto& entry : document) {
    const auto key = entry.first.as<std::string>();
    if (std::find(kKnown.begin(), kKnown.end(), key) == kKnown.end()) {
      return InFile(file, "unknown field '" + key +
                              "' (environment.yml has name, channels, "
                              "dependencies, variables and prefix)");
    }
  }
  const YAML::Node dependencies = document["dependencies"];
  if (!dependencies || !dependencies.IsSequence()) {
    return InFile(file, "has no 'dependencies' list: not an environment.yml");
  }
  PackageList list;
  list.source = file.string();
  list.name = Text(document["name"]);
  list.complete = true;
  bool any_without_build = false;
  for (const auto& dependency : dependencies) {
    if (dependency.IsMap()) {
      const YAML::Node pip = dependency["pip"];
      if (!pip || dependency.size() != 1 || !pip.IsSequence()) {
        return InFile(file, "a dependency entry is a mapping but not a 'pip:' list");
      }
      for (const auto& requirement : pip) {
        auto package = ParsePipSpec(Text(requirement));
        if (!package.ok()) return InFile(file, package.status().message());
        any_without_build =
            any_without_build || package->version_operator != "==" || package->version.empty();
        list.packages.push_back(std::move(package).value());
      }
      continue;
    }
    if (!dependency.IsScalar())
      return InFile(file, "a dependency is neither a spec nor a pip list");
    auto package = ParseCondaSpec(dependency.as<std::string>());
    if (!package.ok()) return InFile(file, package.status().message());
    any_without_build = any_without_build || package->build.empty();
    list.packages.push_back(std::move(package).value());
  }
  // Without builds (--no-builds, --from-history) the file names what the
  // user asked for, not every package the environment holds.
  list.complete = !any_without_build;
  if (const YAML::Node variables = document["variables"]) {
    if (!variables.IsMap()) return InFile(file, "'variables' is not a mapping of NAME: value");
    for (const auto& variable : variables) {
      list.variables.emplace_back(variable.first.as<std::string>(), Text(variable.second));
    }
  }
  return Finish(std::move(list));
}

}  // namespace

Result<PackageList> ReadExplicitFile(const fs::path& file) {
  auto text = ReadWholeFile(file);
  if (!text.ok()) return text.status();
  std::istringstream lines(*text);
  std::string line;
  bool explicit_seen = false;
  PackageList list;
  list.source = file.string();
  list.complete = true;
  list.lists_pip = false;  // `conda list --explicit` leaves pip packages out
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.starts_with("#")) continue;
    if (line == "@EXPLICIT") {
      explicit_seen = true;
      continue;
    }
    if (!explicit_seen) {
      return InFile(file, "line " + std::to_string(number) +
                              " comes before the @EXPLICIT line: "
                              "not a `conda list --explicit` file");
    }
    auto package = PackageFromUrl(line);
    if (!package.ok())
      return InFile(file, "line " + std::to_string(number) + ": " + package.status().message());
    package->channel = ShortChannel(package->channel);
    list.packages.push_back(std::move(package).value());
  }
  if (!explicit_seen)
    return InFile(file, "has no @EXPLICIT line: not a `conda list --explicit` file");
  return Finish(std::move(list));
}

namespace {

Result<PackageList> ReadCondaLockUnguarded(const fs::path& file, std::string_view platform) {
  auto loaded = LoadYaml(file);
  if (!loaded.ok()) return loaded.status();
  const YAML::Node document = std::move(loaded).value();
  if (!document.IsMap() || !document["package"] || !document["package"].IsSequence()) {
    return InFile(file, "has no 'package' list: not a conda-lock.yml");
  }
  if (Text(document["version"]) != "1") {
    return InFile(file, "is conda-lock format version '" + Text(document["version"]) +
                            "': sray reads version 1");
  }
  PackageList list;
  list.source = file.string();
  list.complete = true;
  for (const auto& entry : document["package"]) {
    if (!entry.IsMap()) return InFile(file, "a 'package' entry is not a mapping");
    if (Text(entry["platform"]) != platform) continue;
    const std::string manager = Text(entry["manager"]);
    Package package;
    if (manager == "conda") {
      auto from_url = PackageFromUrl(Text(entry["url"]));
      if (!from_url.ok())
        return InFile(file,
                      "package '" + Text(entry["name"]) + "': " + from_url.status().message());
      package = std::move(from_url).value();
      package.channel = ShortChannel(package.channel);
    } else if (manager == "pip") {
      package.manager = Manager::kPip;
      package.channel = "pypi";
      package.name = NormalizeName(Manager::kPip, Text(entry["name"]));
      package.version = Text(entry["version"]);
    } else {
      return InFile(file, "package '" + Text(entry["name"]) + "' has manager '" + manager +
                              "': sray knows conda and pip");
    }
    if (const YAML::Node hash = entry["hash"]; hash && hash.IsMap()) {
      package.md5 = Text(hash["md5"]);
      package.sha256 = Text(hash["sha256"]);
    }
    if (package.name.empty() || package.version.empty()) {
      return InFile(file, "a package lacks its name or version");
    }
    list.packages.push_back(std::move(package));
  }
  if (list.packages.empty()) {
    return InFile(file, "has no package for platform " + std::string(platform));
  }
  return Finish(std::move(list));
}

}  // namespace

// yaml-cpp throws for documents of an unexpected shape (a scalar where a
// mapping was expected, and so on): every such case is a malformed file.
Result<PackageList> ReadEnvironmentYaml(const fs::path& file) {
  try {
    return ReadEnvironmentYamlUnguarded(file);
  } catch (const YAML::Exception& error) {
    return InFile(file, std::string("unexpected YAML structure: ") + error.what());
  }
}

Result<PackageList> ReadCondaLock(const fs::path& file, std::string_view platform) {
  try {
    return ReadCondaLockUnguarded(file, platform);
  } catch (const YAML::Exception& error) {
    return InFile(file, std::string("unexpected YAML structure: ") + error.what());
  }
}

Result<std::string> ReadWholeFile(const fs::path& file) {
  std::ifstream stream(file, std::ios::binary);
  if (!stream) return Status::FromErrno(errno, "cannot read " + file.string());
  std::ostringstream text;
  text << stream.rdbuf();
  return text.str();
}

Result<SpecFormat> DetectSpecFormat(const fs::path& path) {
  std::error_code error;
  if (fs::is_directory(path, error)) return SpecFormat::kPrefix;
  if (!fs::exists(path, error)) {
    return Status::NotFound(path.string() +
                            " does not exist: give a prefix, an environment.yml, "
                            "an explicit file, a conda-lock.yml or a sray lock");
  }
  auto text = ReadWholeFile(path);
  if (!text.ok()) return text.status();
  if (text->starts_with(kLockHeader)) return SpecFormat::kSrayLock;
  if (text->find("\n@EXPLICIT") != std::string::npos || text->starts_with("@EXPLICIT")) {
    return SpecFormat::kExplicit;
  }
  if (text->find("\npackage:") != std::string::npos &&
      text->find("metadata:") != std::string::npos) {
    return SpecFormat::kCondaLock;
  }
  return SpecFormat::kEnvironmentYaml;
}

Result<PackageList> ReadSpec(const fs::path& path) {
  auto format = DetectSpecFormat(path);
  if (!format.ok()) return format.status();
  switch (*format) {
    case SpecFormat::kPrefix: return ReadPrefix(path);
    case SpecFormat::kSrayLock: return ReadLock(path);
    case SpecFormat::kExplicit: return ReadExplicitFile(path);
    case SpecFormat::kCondaLock: return ReadCondaLock(path);
    case SpecFormat::kEnvironmentYaml: break;
  }
  return ReadEnvironmentYaml(path);
}

}  // namespace sray::envs
