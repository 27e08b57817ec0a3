#pragma once

#include <string>

namespace sray::core {

// True when this process was started by a node manager as a worker.
bool IsWorkerProcess();
// Serves tasks from the node manager until it ends the process.
[[noreturn]] void RunWorker();

}  // namespace sray::core
