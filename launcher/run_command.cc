#include "run_command.h"

#include <cstdlib>
#include <iostream>
#include <memory>

#include "command_line.h"
#include "local_job.h"

namespace sray::launcher {
namespace {

// Where `sray run` finds admin defaults, as plugstack.conf's config= does
// under Slurm: $SRAY_CONFIG, else /etc/sray/sray.toml when it exists.
std::optional<std::filesystem::path> AdminConfig() {
  if (const char* named = std::getenv("SRAY_CONFIG"); named != nullptr && *named != '\0') {
    return std::filesystem::path(named);
  }
  std::error_code ignored;
  if (std::filesystem::exists("/etc/sray/sray.toml", ignored)) return "/etc/sray/sray.toml";
  return std::nullopt;
}

}  // namespace

void AddRunCommand(CLI::App& app) {
  auto request = std::make_shared<LocalJobRequest>();
  auto* run = app.add_subcommand(
      "run", "Run PROGRAM as a job of N emulated nodes on this machine, like srun --ray-cluster");
  run->add_option("-N,--nodes", request->nodes, "Emulated nodes")
      ->default_val(1)
      ->check(WholeNumberFrom(1, 1024));
  run->add_option("--tasks-per-node", request->tasks_per_node, "Processes per node")
      ->default_val(1)
      ->check(WholeNumberFrom(1, 1024));
  run->add_option("--cpus-per-node", request->cpus_per_node,
                  "CPUs each emulated node offers to the scheduler (default: this machine's)")
      ->check(WholeNumberFrom(1, 100000));
  run->add_option("--mem-per-node", request->memory_per_node,
                  "Memory each emulated node offers to the scheduler, e.g. 2G (default: this "
                  "machine's memory divided among the nodes)")
      ->check(CLI::Validator(
          [](const std::string& size) {
            return size.starts_with('-') ? "'" + size + "' is negative: give a size such as 2G"
                                         : std::string();
          },
          "SIZE"))
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Validator(
          [](const std::string& bytes) {
            return bytes == "0" ? std::string("give a size above 0, e.g. 2G") : std::string();
          },
          "SIZE"));
  run->add_flag("-l,--label", request->label,
                "Prefix each output line with its rank, like srun --label");
  run->add_option("--ray-cluster", request->option_list,
                  "Options as for srun --ray-cluster: config=FILE, log_level=..., tmpdir=DIR");
  // Everything from PROGRAM on belongs to the program, dashes included.
  run->prefix_command();
  run->footer("PROGRAM [ARGS...] follows the options; its own options are passed through.");
  run->callback([request, run] {
    request->command = run->remaining();
    if (request->command.empty()) {
      std::cerr << "sray: no program given: usage: sray run [options] PROGRAM [ARGS...]\n";
      throw CLI::RuntimeError(2);
    }
    request->admin_config = AdminConfig();
    auto end = RunLocalJob(*request);
    if (!end.ok()) {
      std::cerr << "sray: " << end.status().message() << "\n";
      throw CLI::RuntimeError(2);
    }
    if (end->interrupting_signal != 0) EndBySignal(end->interrupting_signal);
    throw CLI::RuntimeError(end->exit_status);
  });
}

}  // namespace sray::launcher
