#pragma once

#include <string>

namespace sray::core {

// True when this process was started by a node manager as a worker (read
// from its launch variables, which RunWorker clears).
bool IsWorkerProcess();
// True once RunWorker has begun: the worker's own tasks and actors run here.
bool WorkerRunning();
// Serves tasks from the node manager until it ends the process.
[[noreturn]] void RunWorker();

}  // namespace sray::core
