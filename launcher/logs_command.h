#pragma once

// `sray logs [JOB] [--node N --worker W | --actor NAME] [--follow] [--log-dir DIR]`:
// what a job's workers printed, from their log files on each node: of a
// running job through its dashboard API, of an ended one from the copy its
// nodes left under log_dir=. Without a worker, the list of logs per node;
// with one (or an actor, found by name in the job's actor list), the end of
// its log, and with --follow the lines as they come until the job ends or
// Ctrl-C.

#include <CLI/CLI.hpp>

namespace sray::launcher {

void AddLogsCommand(CLI::App& app);

}  // namespace sray::launcher
