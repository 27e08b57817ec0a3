#pragma once

// Runs one task in a worker: reads its arguments (inline, or mapped from the
// node's store), calls the registered function, and stores its result
// (inline when small, in the store otherwise). Every failure becomes an
// outcome for the owner; nothing escapes.

#include <cstdint>
#include <memory>

#include "core/protocol.h"
#include "core/store_access.h"
#include "sray/internal/function_registry.h"

namespace sray::core {

TaskOutcome ExecuteTask(const TaskSpec& spec, StoreAccess& store, std::uint32_t node_id);
// Runs an actor's factory; on success `instance` holds the new actor.
TaskOutcome ConstructActor(const TaskSpec& spec, StoreAccess& store, std::uint32_t node_id,
                           internal::ActorInstance& instance);
// Runs one method call on an actor's instance.
TaskOutcome ExecuteActorCall(const TaskSpec& spec, StoreAccess& store, std::uint32_t node_id,
                             const internal::ActorInstance& instance);

}  // namespace sray::core
