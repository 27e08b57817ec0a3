// srun, sbatch and salloc: register the option and check it before launch;
// in srun, serve the step's wire-up (wire/rendezvous_server.h).

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/random_bytes.h"
#include "contexts.h"
#include "jobsetup/resolved_options.h"
#include "option_argument.h"
#include "plugin_state.h"
#include "spank_status.h"
#include "wire/rendezvous_codec.h"
#include "wire/rendezvous_server.h"

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
        "tmpdir=DIR, wireup=srun|pmix."),
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
  PluginState& state = State();
  if (!state.cluster_requested) return Status::Ok();
  auto resolved = jobsetup::ResolveOptions(
      {.admin_config = state.plugstack.admin_config, .option_list = state.option_list});
  if (!resolved.ok()) return resolved.status();
  state.wireup = resolved->Get("wireup");
  return Status::Ok();
}

namespace {

Result<std::uint32_t> LocalNumber(spank_t handle, spank_item_t item, const char* what) {
  std::uint32_t value = 0;
  SRAY_RETURN_IF_ERROR(
      FromSpank(spank_get_item(handle, item, &value), std::string("cannot read ") + what));
  return value;
}

Status StartRendezvous(spank_t handle, PluginState& state) {
  auto job = LocalNumber(handle, S_JOB_ID, "the job id");
  if (!job.ok()) return job.status();
  auto step = LocalNumber(handle, S_JOB_STEPID, "the step id");
  if (!step.ok()) return step.status();
  wire::rendezvous::Invitation invitation;
  SRAY_RETURN_IF_ERROR(FillRandom(invitation.token, "the rendezvous token"));
  auto server = wire::rendezvous::RendezvousServer::Start(invitation.token);
  if (!server.ok()) return server.status();
  invitation.step = std::to_string(*job) + "." + std::to_string(*step);
  invitation.port = (*server)->port();
  // srun passes its own environment to the tasks it launches.
  if (::setenv(wire::rendezvous::kRendezvousVariable,
               wire::rendezvous::FormatInvitation(invitation).c_str(), 1) != 0) {
    return Status::FromErrno(errno, "cannot pass the rendezvous to the tasks");
  }
  state.rendezvous = std::move(server).value();
  return Status::Ok();
}

}  // namespace

Status StartWireUpService(spank_t handle) {
  PluginState& state = State();
  if (!state.cluster_requested || state.wireup != "srun") return Status::Ok();
  if (const Status started = StartRendezvous(handle, state); !started.ok()) {
    // The ranks then find no invitation and fence through PMIx: the step
    // still starts, and says why it took the other way.
    ::setenv(wire::rendezvous::kRendezvousVariable, wire::rendezvous::kThroughPmix, 1);
    state.rendezvous.reset();
    slurm_error(
        "sray: cannot serve the step's wire-up from srun: %s: the ranks exchange their addresses "
        "through PMIx's fence instead (--ray-cluster=wireup=pmix says so and stops this message)",
        started.message().c_str());
  }
  return Status::Ok();
}

void StopWireUpService() {
  State().rendezvous.reset();
}

}  // namespace sray::spank
