#include "plugstack_arguments.h"

namespace sray::spank {

Result<PlugstackArguments> ParsePlugstackArguments(std::span<const std::string_view> arguments) {
  PlugstackArguments parsed;
  for (const auto argument : arguments) {
    constexpr std::string_view kConfig = "config=";
    if (!argument.starts_with(kConfig)) {
      return Status::InvalidArgument("plugstack.conf: unknown argument '" + std::string(argument) +
                                     "' after the sray plugin: the only accepted one is "
                                     "config=/absolute/path/sray.toml");
    }
    if (parsed.admin_config) {
      return Status::InvalidArgument("plugstack.conf: config= is given twice: keep one");
    }
    const std::filesystem::path path(argument.substr(kConfig.size()));
    if (!path.is_absolute()) {
      return Status::InvalidArgument("plugstack.conf: config='" + path.string() +
                                     "' is not an absolute path: write it from /");
    }
    parsed.admin_config = path;
  }
  return parsed;
}

}  // namespace sray::spank
