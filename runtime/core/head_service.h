#pragma once

// How a process reaches the head's actor directory: the driver calls it in
// process, every other process over the transport (rank 0). Errors keep the
// directory's Status, so callers see the same message either way.
//
// Thread-safety: any thread. WaitForChange never blocks; `done` runs later
// on a transport or directory thread and must not block either.

#include <functional>
#include <memory>
#include <string>

#include "core/actor_directory.h"
#include "core/protocol.h"
#include "sray/internal/runtime.h"
#include "transport/transport.h"

namespace sray::core {

class HeadService {
 public:
  virtual ~HeadService() = default;
  virtual Result<ActorInfo> CreateActor(const ActorCreation& creation) = 0;
  virtual Result<ActorInfo> LookupActor(const std::string& name) = 0;
  virtual void WaitForChange(const ActorWait& wait, std::function<void(Result<ActorInfo>)> done) = 0;
  virtual Status KillActor(const ActorKill& kill) = 0;
  virtual Result<PlacementGroupInfo> CreatePlacementGroup(const PlacementGroupCreation& creation) = 0;
  // Returns the group's state once placed or removed, or at the timeout.
  virtual Result<PlacementGroupInfo> WaitPlacementGroup(std::uint64_t id, internal::Timeout timeout) = 0;
  virtual Status RemovePlacementGroup(std::uint64_t id) = 0;
};

// In the driver: the directory itself. It must outlive the service.
std::unique_ptr<HeadService> MakeLocalHead(ActorDirectory& directory);
// Anywhere else: requests to `head_rank`; answers to WaitForChange come back
// as kActorChanged messages through this process's node manager (`self`
// names this process to the head). Registers that handler; the transport
// must outlive the service.
struct Caller {
  std::uint32_t rank = 0;
  std::uint32_t node = 0;
};
std::unique_ptr<HeadService> MakeRemoteHead(transport::Transport& transport, std::uint32_t head_rank,
                                            Caller self);

}  // namespace sray::core
