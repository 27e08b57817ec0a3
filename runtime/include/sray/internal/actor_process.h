#pragma once

// Whether this worker process may host another actor after its actor is
// killed. A killed actor's worker normally destroys the instance and goes
// back to its node's pool (an actor costs no process start then); code that
// leaves state in the process that must not reach the next actor (a
// communication group, a device context, threads of a library) calls this
// once, and the process then ends with its actor, as every actor's did
// before. Not for users; sray::train calls it in its workers.
//
// Thread-safety: any thread.

namespace sray::internal {

void EndProcessWithActor();

}  // namespace sray::internal
