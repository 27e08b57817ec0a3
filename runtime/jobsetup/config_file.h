#pragma once

// Reads an sray TOML configuration file: the admin defaults named by
// plugstack.conf (`config=/etc/sray/sray.toml`) or a user file named by
// `--ray-cluster=config=/abs/path.toml`. Top-level keys are option keys:
//
//   tmpdir = "/scratch/local"
//   log_level = "warning"
//
// Unknown keys, tables, arrays and non-string values are errors that name the
// file and line. Thread-safety: pure function.

#include <filesystem>
#include <vector>

#include "common/status.h"
#include "jobsetup/options.h"

namespace sray::jobsetup {

Result<std::vector<OptionAssignment>> ReadConfigFile(const std::filesystem::path& path);

}  // namespace sray::jobsetup
