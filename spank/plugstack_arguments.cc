#include "plugstack_arguments.h"

#include <string>

namespace sray::spank {
namespace {

// The absolute path after `name=`, once.
Status ParsePath(std::string_view argument, std::string_view name, bool& seen,
                 std::filesystem::path& path) {
  if (seen) {
    return Status::InvalidArgument("plugstack.conf: " + std::string(name) +
                                   "= is given twice: keep one");
  }
  seen = true;
  path = argument.substr(name.size() + 1);
  if (!path.is_absolute()) {
    return Status::InvalidArgument("plugstack.conf: " + std::string(name) + "='" + path.string() +
                                   "' is not an absolute path: write it from /");
  }
  // "/var/spool/sray/" names the same directory as "/var/spool/sray" (and
  // path operations that look at the last component must see "sray").
  path = path.lexically_normal();
  if (!path.has_filename() && path.has_parent_path() && path != path.root_path()) {
    path = path.parent_path();
  }
  return Status::Ok();
}

}  // namespace

Result<PlugstackArguments> ParsePlugstackArguments(std::span<const std::string_view> arguments) {
  PlugstackArguments parsed;
  bool config_seen = false;
  bool state_seen = false;
  for (const auto argument : arguments) {
    if (argument.starts_with("config=")) {
      std::filesystem::path path;
      SRAY_RETURN_IF_ERROR(ParsePath(argument, "config", config_seen, path));
      parsed.admin_config = path;
    } else if (argument.starts_with("state_dir=")) {
      SRAY_RETURN_IF_ERROR(ParsePath(argument, "state_dir", state_seen, parsed.state_directory));
    } else {
      return Status::InvalidArgument("plugstack.conf: unknown argument '" + std::string(argument) +
                                     "' after the sray plugin: the accepted ones are "
                                     "config=/absolute/path/sray.toml and "
                                     "state_dir=/absolute/path (default " +
                                     kDefaultStateDirectory + ")");
    }
  }
  return parsed;
}

}  // namespace sray::spank
