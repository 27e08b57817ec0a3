#pragma once

// Processes for tests that need one in a given state.

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

namespace sray::testing {

// A pid that ran and is gone: a child that exited and was reaped.
inline pid_t PidOfAnEndedProcess() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

}  // namespace sray::testing
