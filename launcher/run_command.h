#pragma once

// `sray run [-N nodes] [--tasks-per-node k] [--cpus-per-node c] [--label]
//           [--ray-cluster=key=value,...] PROGRAM [ARGS...]`

#include <CLI/CLI.hpp>

namespace sray::launcher {

void AddRunCommand(CLI::App& app);

}  // namespace sray::launcher
