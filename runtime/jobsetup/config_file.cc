#include "jobsetup/config_file.h"

#include <fstream>
#include <sstream>

#include <toml++/toml.h>

namespace sray::jobsetup {
namespace {

std::string Location(const std::filesystem::path& path, const toml::source_region& region) {
  return path.string() + ":" + std::to_string(region.begin.line);
}

}  // namespace

Result<std::vector<OptionAssignment>> ReadConfigFile(const std::filesystem::path& path) {
  std::ifstream stream(path, std::ios::binary);
  if (!stream) {
    const int error_number = errno;
    return Status::FromErrno(error_number, "cannot read config file " + path.string())
        .WithRemedy("check the path and that the job user can read the file");
  }
  std::error_code ignored;
  if (std::filesystem::is_directory(path, ignored)) {
    return Status::InvalidArgument("config file " + path.string() +
                                   " is a directory: name the TOML file inside it");
  }
  std::stringstream contents;
  contents << stream.rdbuf();
  if (stream.bad()) {
    return Status::IoError("cannot read config file " + path.string() + ": read error");
  }

  // Debian's toml++ is a shared library built with exceptions; they stop here.
  toml::table table;
  try {
    table = toml::parse(contents.str(), path.string());
  } catch (const toml::parse_error& error) {
    return Status::InvalidArgument(Location(path, error.source()) +
                                   ": malformed TOML: " + std::string(error.description()) +
                                   ": fix the file (see docs/ARCHITECTURE.md, Configuration)");
  }

  std::vector<OptionAssignment> assignments;
  for (const auto& [key_node, value] : table) {
    const std::string key(key_node.str());
    const std::string where = Location(path, key_node.source());
    const OptionSpec* spec = FindOption(key);
    if (spec == nullptr) {
      return Status::InvalidArgument(where + ": unknown key '" + key + "': accepted keys are " +
                                     AcceptedKeys());
    }
    if (spec->command_line_only) {
      return Status::InvalidArgument(
          where + ": key '" + key + "' is only accepted in --ray-cluster: remove it from the file");
    }
    const auto* text = value.as_string();
    if (text == nullptr) {
      return Status::InvalidArgument(where + ": key '" + key + "' must be a string: write " + key +
                                     " = \"...\"");
    }
    auto canonical = CanonicalValue(*spec, text->get(), where);
    if (!canonical.ok()) return canonical.status();
    assignments.push_back({key, std::move(canonical).value(), where});
  }
  return assignments;
}

}  // namespace sray::jobsetup
