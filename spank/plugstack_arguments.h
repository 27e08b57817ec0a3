#pragma once

// Parses the arguments that follow the plugin's path in plugstack.conf:
//
//   required /usr/lib/sray/spank_sray.so config=/etc/sray/sray.toml state_dir=/var/spool/sray
//
// Strictly: an unknown or repeated argument is an error, so a typo in the
// admin's file is found at the first srun instead of being ignored.

#include <filesystem>
#include <optional>
#include <span>
#include <string_view>

#include "common/status.h"

namespace sray::spank {

// Where slurmstepd keeps each node's step records (jobsetup/step_record.h)
// unless plugstack.conf says otherwise: node-local, root's, kept across
// reboots like Slurm's own spool.
inline constexpr const char* kDefaultStateDirectory = "/var/spool/sray";

struct PlugstackArguments {
  std::optional<std::filesystem::path> admin_config;
  std::filesystem::path state_directory = kDefaultStateDirectory;
};

Result<PlugstackArguments> ParsePlugstackArguments(std::span<const std::string_view> arguments);

}  // namespace sray::spank
