// The `sray` command. Each subcommand lives in its own file and registers
// itself on the CLI11 application here.

#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "command_line.h"
#include "config_command.h"
#include "env_command.h"
#include "inherited_signals.h"
#include "login_command.h"
#include "logs_command.h"
#include "run_command.h"
#include "sray/version.h"
#include "status_command.h"

namespace {

void RecordInheritedSignalsBeforeLibraries(int /*argc*/, char** /*argv*/, char** /*envp*/) {
  sray::launcher::RecordInheritedSignals();
}

// Runs before any shared library's initializer (inherited_signals.h says why).
[[gnu::section(".preinit_array"), gnu::used]] void (*const kRecordInheritedSignals)(
    int, char**, char**) = &RecordInheritedSignalsBeforeLibraries;

int Run(int argc, char** argv) {
  CLI::App app{
      "sray: Ray's programming model on Slurm, in C++.\n"
      "In a Slurm job use `srun --ray-cluster ./prog`; see `srun --help`."};
  app.set_version_flag("--version", std::string("sray ") + SRAY_VERSION_STRING);
  app.require_subcommand(1);
  sray::launcher::AddConfigCommand(app);
  sray::launcher::AddEnvCommand(app);
  sray::launcher::AddLoginCommand(app);
  sray::launcher::AddLogsCommand(app);
  sray::launcher::AddRunCommand(app);
  sray::launcher::AddStatusCommand(app);
  const std::vector<std::string> given(argv + 1, argv + argc);
  std::vector<std::string> arguments = sray::launcher::WithoutRunSeparator(given);
  std::reverse(arguments.begin(), arguments.end());  // CLI11 takes them last first
  try {
    app.parse(arguments);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() != 0 && dynamic_cast<const CLI::RuntimeError*>(&error) == nullptr) {
      std::cerr << sray::launcher::ParseErrorLine(app, error, given) << "\n";
      return 2;  // a usage error, as sray's own
    }
    return app.exit(error);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& error) {
    std::cerr << "sray: unexpected error: " << error.what() << ": please report this\n";
  }
  return 70;  // EX_SOFTWARE
}
