#include "config_command.h"

#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "jobsetup/options.h"
#include "jobsetup/resolved_options.h"

namespace sray::launcher {
namespace {

struct ConfigCheckArguments {
  std::string admin_config;
  std::string option_list;
};

int RunConfigCheck(const ConfigCheckArguments& arguments) {
  jobsetup::ResolveInputs inputs{.admin_config = std::nullopt,
                                 .option_list = arguments.option_list};
  if (!arguments.admin_config.empty()) inputs.admin_config = arguments.admin_config;
  auto resolved = jobsetup::ResolveOptions(inputs);
  if (!resolved.ok()) {
    std::cerr << "sray: " << resolved.status().message() << "\n";
    return 2;
  }
  for (const auto& spec : jobsetup::OptionSchema()) {
    const std::string& value = resolved->Get(spec.key);
    std::cout << spec.key << " = " << (value.empty() ? "(unset)" : value) << "    # "
              << resolved->SourceOf(spec.key) << "\n";
  }
  return 0;
}

}  // namespace

void AddConfigCommand(CLI::App& app) {
  auto* config = app.add_subcommand("config", "Inspect sray configuration");
  config->require_subcommand(1);
  auto arguments = std::make_shared<ConfigCheckArguments>();
  auto* check = config->add_subcommand(
      "check", "Resolve options as a step would and print each value with its source");
  check->add_option("--admin-config", arguments->admin_config,
                    "Admin TOML file (the config= of plugstack.conf)");
  check->add_option("options", arguments->option_list,
                    "The --ray-cluster value, e.g. log_level=debug,tmpdir=/scratch");
  check->callback([arguments] { throw CLI::RuntimeError(RunConfigCheck(*arguments)); });
}

}  // namespace sray::launcher
