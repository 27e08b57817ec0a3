#pragma once

// `sray logs [JOB] [--node N --worker W] [--follow]`: what a running job's
// workers printed, from their log files on each node, through the job's
// dashboard API: without --worker the list of logs per node, with it the
// end of that worker's log, and with --follow the lines as they come until
// the job ends or Ctrl-C.

#include <CLI/CLI.hpp>

namespace sray::launcher {

void AddLogsCommand(CLI::App& app);

}  // namespace sray::launcher
