#pragma once

// Local mode, as Ray's C++ API has it: a program that uses tasks and actors
// runs started directly, without srun or sray run, in one process. Tasks run
// on a pool of threads, each actor on threads of its own (max_concurrency
// of them), objects stay in memory, and the Owner is the same one a job
// uses, so Get, Wait, retries and the typed errors behave as in a job.
// Turned on by SRAY_LOCAL_MODE=1 or sray::InitOptions::local_mode.
//
// What differs from a job, by nature: one node (CurrentNode says node 0 of
// 1); resources are checked for sense but not reserved (every task and
// actor runs whatever it asks); nothing can die alone, so a task's retries
// after a worker death and actor restarts after a crash never happen
// (Kill with restarts left does restart the actor); Kill cannot stop a call
// that is running, it fails the calls after it.
//
// Thread-safety: Start and the destructor from one thread (Init, Shutdown).

#include <memory>

namespace sray::core {

class LocalMode {
 public:
  // Makes this process's runtime a local one (SetProcessRuntime).
  static std::unique_ptr<LocalMode> Start();
  // Ends the actors and the task threads, then the runtime.
  ~LocalMode();
  LocalMode(const LocalMode&) = delete;
  LocalMode& operator=(const LocalMode&) = delete;

  struct Parts;

 private:
  explicit LocalMode(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> parts_;
};

// True when SRAY_LOCAL_MODE is set to 1 (or true/yes/on).
bool LocalModeRequested();
// True while a LocalMode runs in this process.
bool InLocalMode();
// True on a thread that local mode runs tasks or actor calls on.
bool OnLocalModeThread();

}  // namespace sray::core
