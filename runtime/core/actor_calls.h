#pragma once

// What an Owner needs from whoever runs this process's actors: ActorClient
// in a job (calls go to actor processes over the transport), LocalActors in
// local mode (actors live in this process). The Owner keeps each call's
// result object and retries; an ActorCalls implementation moves the calls.
//
// Thread-safety: every member may be called from any thread. Enqueue is
// called under the owner's lock, so it must not call back into the owner.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/protocol.h"
#include "sray/internal/runtime.h"

namespace sray::core {

class ActorCalls {
 public:
  virtual ~ActorCalls() = default;

  // The public API's entry points (throw sray's typed errors).
  virtual internal::ActorId Create(const std::string& factory,
                                   std::vector<internal::TaskArgument> arguments,
                                   const internal::ActorOptions& options) = 0;
  virtual std::optional<internal::NamedActor> FindNamed(const std::string& name) = 0;
  virtual void Kill(internal::ActorId actor, bool no_restart) = 0;
  virtual std::uint64_t CreatePlacementGroup(
      const std::string& name, const std::vector<std::map<std::string, double>>& bundles,
      PlacementStrategy strategy) = 0;
  virtual internal::PlacementGroupState WaitPlacementGroup(std::uint64_t id,
                                                           internal::Timeout timeout) = 0;
  virtual void RemovePlacementGroup(std::uint64_t id) = 0;

  // From the Owner. Enqueue at submission (under the owner's lock, so the
  // queue has submission order); Send once the arguments are resolved (and
  // again for a retry); Finished once the owner holds the call's final
  // outcome. Outcomes go back through Owner::OnTaskOutcome.
  virtual void Enqueue(internal::ActorId actor, std::uint64_t task_id) = 0;
  virtual void Send(TaskSpec spec) = 0;
  virtual void Finished(internal::ActorId actor, std::uint64_t task_id) = 0;
};

}  // namespace sray::core
