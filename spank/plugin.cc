// The SPANK entry points: a thin, noexcept dispatcher. Each shim forwards to
// the context's implementation (local_context.cc, remote_context.cc), prints a
// failure in the "sray: what: why, and what to do" shape and turns it into the
// return code Slurm expects. Nothing may throw across the C boundary.

#include "spank_api.h"

#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "contexts.h"
#include "plugin_state.h"

extern "C" {
SPANK_PLUGIN(sray, 1)
}

namespace sray::spank {

PluginState& State() {
  static PluginState state;
  return state;
}

namespace {

int Report(const Status& status) {
  if (status.ok()) return ESPANK_SUCCESS;
  slurm_error("sray: %s", status.message().c_str());
  return ESPANK_ERROR;
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
  return ESPANK_ERROR;
}

}  // namespace
}  // namespace sray::spank

using sray::spank::Guarded;

// spank.h declares these without noexcept, so the definitions cannot add it;
// each body is a single call to the noexcept Guarded, which is what keeps
// exceptions from crossing into Slurm.

extern "C" int slurm_spank_init(spank_t handle, int argc, char** argv) {
  return Guarded("slurm_spank_init", [&] {
    std::vector<std::string_view> arguments(argv, argv + argc);
    return sray::spank::InitializePlugin(handle, arguments);
  });
}

extern "C" int slurm_spank_init_post_opt(spank_t /*handle*/, int /*argc*/, char** /*argv*/) {
  return Guarded("slurm_spank_init_post_opt", [] {
    switch (spank_context()) {
      case S_CTX_LOCAL:
      case S_CTX_ALLOCATOR: return sray::spank::ValidateRequestedOptions();
      default: return sray::Status::Ok();
    }
  });
}

extern "C" int slurm_spank_user_init(spank_t handle, int /*argc*/, char** /*argv*/) {
  // Slurm ignores a failure here; remote_context.cc keeps it for task_init.
  return Guarded("slurm_spank_user_init", [&] { return sray::spank::PrepareStepOnNode(handle); });
}

extern "C" int slurm_spank_task_init(spank_t handle, int /*argc*/, char** /*argv*/) {
  return Guarded("slurm_spank_task_init", [&] {
    sray::Status status = sray::spank::ExportTaskEnvironment(handle);
    if (!status.ok()) {
      // The task's stderr is the user's terminal; the log line above is the admin's.
      std::fprintf(stderr, "sray: %s\n", status.message().c_str());
    }
    return status;
  });
}

extern "C" int slurm_spank_exit(spank_t /*handle*/, int /*argc*/, char** /*argv*/) {
  return Guarded("slurm_spank_exit", [] {
    return spank_context() == S_CTX_REMOTE ? sray::spank::CleanUpStepOnNode() : sray::Status::Ok();
  });
}
