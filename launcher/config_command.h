#pragma once

// `sray config check`: resolves options exactly as a step would (defaults,
// admin file, user file, --ray-cluster text) and prints the result, so users
// and admins can test a configuration without submitting a job.

#include <CLI/CLI.hpp>

namespace sray::launcher {

void AddConfigCommand(CLI::App& app);

}  // namespace sray::launcher
