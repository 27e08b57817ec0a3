// The SPANK entry points: a thin, noexcept dispatcher. Each shim forwards to
// the context's implementation (local_context.cc, remote_context.cc), prints a
// failure in the "sray: what: why, and what to do" shape and turns it into the
// return code Slurm expects. Nothing may throw across the C boundary.

#include "spank_api.h"

#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "contexts.h"
#include "plugin_state.h"

// SPANK_PLUGIN's const arrays would have internal linkage in C++; declaring
// them extern "C" first gives Slurm the symbols it looks up.
extern "C" {
extern const char plugin_name[];
extern const char plugin_type[];
extern const unsigned int plugin_version;
extern const unsigned int spank_plugin_version;
SPANK_PLUGIN(sray, 1)
}

namespace sray::spank {

PluginState& State() {
  static PluginState state;
  return state;
}

namespace {

// Slurm treats only negative return codes as failure (ESPANK_ERROR is a
// positive 3000 and would be logged, then ignored).
constexpr int kFailure = -1;

int Report(const Status& status) {
  if (status.ok()) return 0;
  // In srun and sbatch this reaches the user's terminal; in a task it reaches
  // the task's stderr and the slurmd log.
  slurm_error("sray: %s", status.message().c_str());
  return kFailure;
}

template <typename Action>
int Guarded(const char* callback, Action&& action) noexcept {
  try {
    return Report(action());
  } catch (const std::exception& error) {
    slurm_error("sray: %s failed unexpectedly: %s: please report this", callback, error.what());
  } catch (...) {
    slurm_error("sray: %s failed unexpectedly: please report this", callback);
  }
  return kFailure;
}

}  // namespace
}  // namespace sray::spank

using sray::spank::Guarded;

// spank.h declares these without noexcept, so the definitions cannot add it;
// each body is a single call to the noexcept Guarded, which is what keeps
// exceptions from crossing into Slurm.

extern "C" int slurm_spank_init(spank_t handle, int argc, char** argv) {
  if (spank_context() == S_CTX_SLURMD) {
    // slurmd calls only init, once, as it starts. A problem here costs the
    // sweep, never slurmd's start (a failing required plugin would stop it):
    // logged, and 0.
    (void)Guarded("slurm_spank_init in slurmd", [&] {
      std::vector<std::string_view> arguments(argv, argv + argc);
      return sray::spank::SweepCrashedStepsAtDaemonStart(arguments);
    });
    return 0;
  }
  return Guarded("slurm_spank_init", [&] {
    std::vector<std::string_view> arguments(argv, argv + argc);
    return sray::spank::InitializePlugin(handle, arguments);
  });
}

extern "C" int slurm_spank_init_post_opt(spank_t handle, int /*argc*/, char** /*argv*/) {
  return Guarded("slurm_spank_init_post_opt", [&] {
    switch (spank_context()) {
      case S_CTX_LOCAL:
      case S_CTX_ALLOCATOR: return sray::spank::ValidateRequestedOptions();
      // A failure is kept for task_init (remote_context.cc), where the user sees it.
      case S_CTX_REMOTE: return sray::spank::PrepareStepOnNode(handle);
      default: return sray::Status::Ok();
    }
  });
}

extern "C" int slurm_spank_local_user_init(spank_t handle, int /*argc*/, char** /*argv*/) {
  return Guarded("slurm_spank_local_user_init",
                 [&] { return sray::spank::StartWireUpService(handle); });
}

extern "C" int slurm_spank_task_init(spank_t handle, int /*argc*/, char** /*argv*/) {
  return Guarded("slurm_spank_task_init",
                 [&] { return sray::spank::ExportTaskEnvironment(handle); });
}

extern "C" int slurm_spank_task_exit(spank_t handle, int /*argc*/, char** /*argv*/) {
  return Guarded("slurm_spank_task_exit",
                 [&] { return sray::spank::EndLeftoversAfterLastTask(handle); });
}

extern "C" int slurm_spank_exit(spank_t handle, int /*argc*/, char** /*argv*/) {
  return Guarded("slurm_spank_exit", [&] {
    if (spank_context() == S_CTX_REMOTE) return sray::spank::EndStepOnNode(handle);
    sray::spank::StopWireUpService();
    return sray::Status::Ok();
  });
}
