#pragma once

// The seam between the public API templates and the runtime behind them, as
// in Ray's C++ API: the templates turn typed calls into serialized bytes and
// object ids; a Runtime moves them. libsray implements it for driver and
// worker processes.
//
// Thread-safety: every member may be called from any thread.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sray/internal/object_id.h"
#include "sray/placement_strategy.h"

namespace sray::internal {

// A value Get returned: bytes that stay valid as long as this lives (a copy
// of a small object, or a read-only mapping of the node's shared memory).
class ObjectValue {
 public:
  virtual ~ObjectValue() = default;
  [[nodiscard]] virtual std::string_view bytes() const = 0;
};

// One counted reference to an object; ObjectRef copies share one. The last
// one dropped tells the owner, which frees the object once no task needs it.
class ObjectHandle {
 public:
  explicit ObjectHandle(ObjectId id) : id_(id) {}
  ~ObjectHandle();
  ObjectHandle(const ObjectHandle&) = delete;
  ObjectHandle& operator=(const ObjectHandle&) = delete;
  [[nodiscard]] const ObjectId& id() const { return id_; }

 private:
  ObjectId id_;
};

// A new handle holding the reference `id` carries. Handles come from a pool
// that hands its memory back to the system once a burst of references is
// dropped (a program holding a million ObjectRefs for a moment leaves no
// allocator bookkeeping behind). Any thread.
[[nodiscard]] std::shared_ptr<ObjectHandle> NewObjectHandle(ObjectId id);

// Room for one new object's bytes: in memory when small, in the node's
// shared memory when large, so a value is serialized straight to where it
// stays. Seal publishes it; a builder dropped unsealed leaves nothing.
class ObjectBuilder {
 public:
  virtual ~ObjectBuilder() = default;
  [[nodiscard]] virtual char* data() = 0;
  // The returned id carries one reference, which the caller's handle owns.
  // `contained`: the references packed inside the value, kept alive with it.
  virtual ObjectId Seal(std::vector<std::shared_ptr<ObjectHandle>> contained) = 0;
};

struct TaskArgument {
  std::string value;                        // used when reference is null
  std::shared_ptr<ObjectHandle> reference;  // an ObjectRef passed by the caller
  // ObjectRefs packed inside `value`, held until the task is done.
  std::vector<std::shared_ptr<ObjectHandle>> contained;
};

struct TaskOptions {
  std::map<std::string, double> resources;  // empty: {"CPU": 1}
  int max_retries = 3;                      // after a worker died; 0 disables
  bool retry_exceptions = false;            // also retry when the task throws
  std::string name;                         // for messages; default: the function
};

using Timeout = std::optional<std::chrono::milliseconds>;

using ActorId = std::uint64_t;  // 0: no actor

struct ActorOptions {
  std::string name;                         // empty: anonymous
  int max_restarts = 0;                     // process deaths survived
  int max_task_retries = 0;                 // per call, after a death
  std::map<std::string, double> resources;  // held for its lifetime; empty: none
  std::uint32_t max_concurrency = 1;        // calls served at once
  std::uint64_t placement_group = 0;        // 0: none
  int bundle_index = -1;                    // -1: any bundle of the group
};

struct NamedActor {
  ActorId id = 0;
  int max_task_retries = 0;
};

// Bundles' nodes once placed; `removed` after RemovePlacementGroup.
struct PlacementGroupState {
  bool placed = false;
  bool removed = false;
  std::vector<std::uint32_t> bundle_nodes;
};

class Runtime {
 public:
  virtual ~Runtime() = default;
  // The returned id carries one reference, which the caller's handle owns.
  virtual ObjectId SubmitTask(const std::string& function, std::vector<TaskArgument> arguments,
                              const TaskOptions& options) = 0;
  // Throws ObjectStoreFullError when the node's store cannot hold `size`.
  virtual std::unique_ptr<ObjectBuilder> CreateObject(std::size_t size) = 0;
  // Throws the typed errors of sray/errors.h.
  virtual std::vector<std::shared_ptr<const ObjectValue>> Get(const std::vector<ObjectId>& ids,
                                                              Timeout timeout) = 0;
  // Which of `ids` are ready: returns once `num_ready` are, or at the timeout.
  virtual std::vector<bool> Wait(const std::vector<ObjectId>& ids, std::size_t num_ready,
                                 Timeout timeout) = 0;
  virtual void RemoveReference(const ObjectId& id) noexcept = 0;
  // An ObjectRef unpacked from a value: a new counted reference to `id`,
  // owned by this process or borrowed from its owner (reached at
  // `owner_address`). Throws ObjectLostError when the owner is gone.
  virtual std::shared_ptr<ObjectHandle> Borrow(const ObjectId& id,
                                               std::string_view owner_address) = 0;
  // The transport address of `id`'s owner, packed with each reference.
  virtual std::string OwnerAddress(const ObjectId& id) = 0;

  // Actors. Throws ConfigError (a taken name, bad options) or
  // InfeasibleResourcesError; the constructor runs later.
  virtual ActorId CreateActor(const std::string& factory, std::vector<TaskArgument> arguments,
                              const ActorOptions& options) = 0;
  // The returned id carries one reference, which the caller's handle owns.
  virtual ObjectId SubmitActorTask(ActorId actor, int max_task_retries, const std::string& method,
                                   std::vector<TaskArgument> arguments, const std::string& name) = 0;
  // Null when no live actor has the name.
  virtual std::optional<NamedActor> FindNamedActor(const std::string& name) = 0;
  virtual void KillActor(ActorId actor, bool no_restart) = 0;

  // Placement groups: bundles of resources reserved on nodes. Throws
  // InfeasibleResourcesError when no layout could ever fit.
  virtual std::uint64_t CreatePlacementGroup(const std::string& name,
                                             const std::vector<std::map<std::string, double>>& bundles,
                                             PlacementStrategy strategy) = 0;
  virtual PlacementGroupState WaitPlacementGroup(std::uint64_t id, Timeout timeout) = 0;
  virtual void RemovePlacementGroup(std::uint64_t id) = 0;
};

// Throws sray::LaunchError before sray::Init.
Runtime& CurrentRuntime();

}  // namespace sray::internal
