#pragma once

// How a node manager tells a worker process it starts who it is: the
// SRAY_WORKER_* environment variables. Both sides of that contract are here,
// writer and reader together, so they cannot drift apart.
//
// Thread-safety: pure functions, except ClearWorkerLaunchVariables, which
// changes this process's environment (call it before starting threads that
// read the environment).

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "transport/bytes.h"
#include "transport/frame.h"

namespace sray::core {

struct WorkerLaunch {
  std::uint32_t rank = 0;          // the worker's transport rank
  std::uint32_t manager_rank = 0;  // its node manager's
  transport::Bytes manager_address;
  std::uint32_t head_rank = 0;  // the head's (actor directory)
  transport::Bytes head_address;
  transport::JobToken secret{};
  pid_t parent = 0;  // the node manager's pid: the worker dies with it
};

// The environment of a worker: `inherited` ("NAME=value" entries, the node
// manager's own) without any SRAY_WORKER_* entry, then the launch's.
std::vector<std::string> WorkerEnvironment(const WorkerLaunch& launch,
                                           const std::vector<std::string>& inherited);

// True when `lookup` (getenv) shows a worker launch.
bool IsWorkerLaunch(const std::function<const char*(const char*)>& lookup);

// Reads a launch back; InvalidArgument naming the variable that is missing
// or malformed (a worker is only ever started by its node manager, so this
// means the environment was damaged).
Result<WorkerLaunch> ReadWorkerLaunch(const std::function<const char*(const char*)>& lookup);

// Removes the variables from this process's environment, so that programs
// the worker's tasks start do not take themselves for workers.
void ClearWorkerLaunchVariables();

}  // namespace sray::core
