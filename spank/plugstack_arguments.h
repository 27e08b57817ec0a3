#pragma once

// Parses the arguments that follow the plugin's path in plugstack.conf:
//
//   required /usr/lib/sray/spank_sray.so config=/etc/sray/sray.toml
//
// Strictly: an unknown or repeated argument is an error, so a typo in the
// admin's file is found at the first srun instead of being ignored.

#include <filesystem>
#include <optional>
#include <span>
#include <string_view>

#include "common/status.h"

namespace sray::spank {

struct PlugstackArguments {
  std::optional<std::filesystem::path> admin_config;
};

Result<PlugstackArguments> ParsePlugstackArguments(std::span<const std::string_view> arguments);

}  // namespace sray::spank
