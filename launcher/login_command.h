#pragma once

// `sray login [JOB]`: prints a one-time login link to a running job's
// dashboard (it gives one browser tab a session, once, within 10 minutes).
// The driver prints such a link only where its output is private, since
// whoever opens it first logs in; this asks the dashboard for a fresh one
// with the token from the user's jobs file, on the head node through Slurm
// when the head's loopback is out of reach, like `sray status`.

#include <CLI/CLI.hpp>

namespace sray::launcher {

void AddLoginCommand(CLI::App& app);

}  // namespace sray::launcher
