#pragma once

// SIGPIPE, which ends a process that writes to a pipe or socket whose reader
// went away. sray's processes must see such a write fail with EPIPE instead:
// a worker ended by it is taken for the root cause of a failure that began
// elsewhere (a training peer's closed Gloo socket). A handler that does
// nothing, not SIG_IGN: exec resets a handled signal to the default, while
// SIG_IGN would pass on to every program the process starts (a shell loop
// writing into `head -1` would then never end).
//
// Thread-safety: these change process-wide signal state; call them where no
// other thread changes SIGPIPE's disposition.

#include <signal.h>

namespace sray {

// Writes to a closed pipe or socket fail with EPIPE from now on.
void FailWritesToClosedPipes();

}  // namespace sray
