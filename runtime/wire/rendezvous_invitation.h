#pragma once

// The rank's side of srun's invitation to wire up through srun: the
// SRAY_RENDEZVOUS variable srun's plugin gives the step's tasks
// (wire/rendezvous_server.h), taken once per process.
//
// Thread-safety: TakeInvitation changes the process's environment; call it
// once, before other threads read the environment (sray::Init does).

#include <optional>

#include "common/status.h"
#include "wire/rendezvous_codec.h"

namespace sray::wire::rendezvous {

// The invitation srun's plugin left for this step's ranks: nullopt when the
// exchange goes through PMIx's fence (no invitation outside srun, srun's
// "pmix" when it could not serve, or one for another step). The variable's
// token is wiped either way, and the variable says "taken" from then on:
// the program's own children must not see the token, and a second sray
// program in the task must learn why it has none. Fails, naming the fix,
// when srun's plugin exported SRAY_WIREUP=srun but --export held the
// invitation back, and when an earlier program took it.
Result<std::optional<Invitation>> TakeInvitation();

}  // namespace sray::wire::rendezvous
