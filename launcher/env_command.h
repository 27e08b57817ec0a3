#pragma once

// `sray env`: conda-exported environments without a step.
//   sray env lock PREFIX|SPEC [-o FILE]   canonical lock and content hash
//   sray env verify SPEC PREFIX           missing, extra, mismatched packages
//   sray env pack PREFIX -o FILE          one file, relocatable
//   sray env unpack FILE PREFIX           with the recorded prefix rewritten
//   sray env stage FILE [--cache DIR]     once per node and lock hash
//   sray env create SPEC -p PREFIX        through conda, mamba or micromamba

#include <CLI/CLI.hpp>

namespace sray::launcher {

void AddEnvCommand(CLI::App& app);

}  // namespace sray::launcher
