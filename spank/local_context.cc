// srun, sbatch and salloc: register the option and check it before launch.

#include <string>

#include "contexts.h"
#include "jobsetup/resolved_options.h"
#include "option_argument.h"
#include "plugin_state.h"
#include "spank_status.h"

namespace sray::spank {
namespace {

int OnRayClusterOption(int /*value*/, const char* argument, int /*remote*/) noexcept {
  // May run twice (command line and environment) and with NULL, "" or
  // "(null)": all mean "defaults". Only remember it here; validation happens once, in
  // init_post_opt, where a failure stops the launch.
  PluginState& state = State();
  state.cluster_requested = true;
  state.option_list = OptionListFromArgument(argument);
  return 0;
}

// Slurm keeps pointers into this table; it must outlive the plugin.
spank_option g_ray_cluster_option = {
    .name = const_cast<char*>("ray-cluster"),
    .arginfo = const_cast<char*>("key=value,..."),
    .usage = const_cast<char*>(
        "Run the step as a private sray cluster: head on the first node, workers on the "
        "rest. Keys: config=FILE, dashboard=HOST:PORT|off, env=PREFIX|PACK|SPEC, "
        "log_dir=DIR, log_level=error|warning|info|debug, log_to_driver=true|false, "
        "max_tasks_in_flight=N, object_store_memory=SIZE, resources=NAME:AMOUNT;..., "
        "tmpdir=DIR."),
    .has_arg = 2,  // optional, and only as --ray-cluster=VALUE
    .val = 0,
    .cb = OnRayClusterOption,
};

}  // namespace

Status InitializePlugin(spank_t handle, std::span<const std::string_view> arguments) {
  auto parsed = ParsePlugstackArguments(arguments);
  if (!parsed.ok()) return parsed.status();
  State().plugstack = std::move(parsed).value();

  switch (spank_context()) {
    case S_CTX_LOCAL:
    case S_CTX_REMOTE:
    case S_CTX_ALLOCATOR:
      // Registered in every context that handles options, or #SBATCH
      // --ray-cluster would not reach the srun steps of the batch script.
      return FromSpank(spank_option_register(handle, &g_ray_cluster_option),
                       "cannot register --ray-cluster");
    default: return Status::Ok();
  }
}

Status ValidateRequestedOptions() {
  const PluginState& state = State();
  if (!state.cluster_requested) return Status::Ok();
  auto resolved = jobsetup::ResolveOptions(
      {.admin_config = state.plugstack.admin_config, .option_list = state.option_list});
  return resolved.status();
}

}  // namespace sray::spank
