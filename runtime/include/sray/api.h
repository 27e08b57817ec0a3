#pragma once

// sray's public C++ API, after Ray's: remote tasks returning ObjectRefs, Get,
// Wait and Put over a shared-memory object store, stateful actors and
// placement groups, across the nodes of a Slurm step (`srun --ray-cluster`)
// or of `sray run`.
//
//   int main(int argc, char** argv) {
//     sray::Init(argc, argv);           // workers never return from here
//     auto ref = sray::Task(square).Remote(7);
//     int value = sray::Get(ref);
//   }
//
// This header is the table of contents: every entry point is declared below,
// each group naming the header that defines its types; the object functions
// are defined at the end of this file.
//
// Thread-safety: after Init, every function may be called from any thread.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sray/actor.h"
#include "sray/errors.h"
#include "sray/internal/contained_refs.h"
#include "sray/internal/function_registry.h"
#include "sray/internal/runtime.h"
#include "sray/internal/serialization.h"
#include "sray/node.h"
#include "sray/object_ref.h"
#include "sray/placement_group.h"
#include "sray/task.h"

namespace sray {

// The declarations below repeat those of the headers named with them, on
// purpose: this is where a reader finds every entry point.
// NOLINTBEGIN(readability-redundant-declaration)

// ---- the job ---------------------------------------------------------------

// Joins the job. On the driver (global rank 0) it returns once every node is
// up; in every other process it runs the node manager or a worker and never
// returns (the process exits when the driver shuts the job down). When the
// process cannot join a job (it was not started by srun --ray-cluster or sray
// run, or the launch failed) it prints one `sray: ...` line saying why and
// what to do, and exits with status 1.
void Init(int argc, char** argv);
struct InitOptions {
  // Local mode: tasks and actors run in this process, objects stay in its
  // memory, no launcher is needed (as SRAY_LOCAL_MODE=1 in the environment
  // does). For running and unit-testing a program on its own; see README.
  bool local_mode = false;
};
void Init(int argc, char** argv, const InitOptions& options);
// Ends the job: workers stop, objects and spill files are removed. Runs at
// exit when the driver does not call it. Idempotent.
void Shutdown();
[[nodiscard]] bool IsInitialized();
// This process's node (sray/node.h).
NodeInfo CurrentNode();

// What each node's object store holds now, like `ray memory` (driver only).
struct NodeStoreUsage {
  std::uint32_t node_id = 0;
  std::uint64_t capacity = 0;   // bytes of shared memory it may use
  std::uint64_t in_memory = 0;  // bytes of objects in shared memory
  std::uint64_t spilled = 0;    // bytes of objects spilled to disk
  std::uint64_t objects = 0;
};
std::vector<NodeStoreUsage> StoreUsage();

// ---- objects (sray/object_ref.h) ---------------------------------------------

// Stores a copy of `value` in the object store; throws ObjectStoreFullError
// when even spilling cannot make room.
template <typename T>
ObjectRef<T> Put(const T& value);

// Waits for the value; throws TaskError, WorkerDiedError, ObjectLostError,
// InfeasibleResourcesError, ObjectStoreFullError, EmptyObjectRefError, or
// (with a timeout) GetTimeoutError.
template <typename T>
T Get(const ObjectRef<T>& ref);
template <typename T>
T Get(const ObjectRef<T>& ref, std::chrono::milliseconds timeout);
template <typename T>
std::vector<T> Get(const std::vector<ObjectRef<T>>& refs);
template <typename T>
std::vector<T> Get(const std::vector<ObjectRef<T>>& refs, std::chrono::milliseconds timeout);

template <typename T>
struct WaitResult {
  std::vector<ObjectRef<T>> ready;
  std::vector<ObjectRef<T>> unready;
};
// Returns once `num_objects` of `refs` are ready (or the timeout passed):
// `ready` holds at most `num_objects` of them (the first ready ones, in the
// order of `refs`) and `unready` every other ref, in order, as in Ray. A
// `num_objects` above the number of refs waits for all of them; 0 only looks.
template <typename T>
WaitResult<T> Wait(const std::vector<ObjectRef<T>>& refs, std::size_t num_objects);
template <typename T>
WaitResult<T> Wait(const std::vector<ObjectRef<T>>& refs, std::size_t num_objects,
                   std::chrono::milliseconds timeout);

// ---- tasks (sray/task.h) -----------------------------------------------------

// sray::Task(f).SetResources(...).SetMaxRetries(n).Remote(args...) -> ObjectRef.
// `f` must be registered with SRAY_REMOTE(f).
template <typename Result, typename... Parameters>
TaskCaller<Result (*)(Parameters...)> Task(Result (*function)(Parameters...));

// ---- actors (sray/actor.h) ---------------------------------------------------

// sray::Actor(Class::Create).SetName(...).Remote(args...) -> ActorHandle<Class>.
template <typename Class, typename... Parameters>
ActorCreator<Class, Parameters...> Actor(Class* (*factory)(Parameters...));
// The live actor of that name, if any.
template <typename Class>
std::optional<ActorHandle<Class>> GetActor(const std::string& name);

// ---- placement groups (sray/placement_group.h) -------------------------------

PlacementGroup CreatePlacementGroup(const PlacementGroupCreationOptions& options);
void RemovePlacementGroup(const PlacementGroup& group);

// NOLINTEND(readability-redundant-declaration)

// ---- definitions -------------------------------------------------------------

namespace internal {

template <typename T>
std::vector<ObjectId> IdsOf(const std::vector<ObjectRef<T>>& refs) {
  std::vector<ObjectId> ids;
  ids.reserve(refs.size());
  for (const auto& ref : refs) ids.push_back(ref.id());  // an empty ref throws here
  return ids;
}

template <typename T>
std::vector<T> GetValues(const std::vector<ObjectRef<T>>& refs, Timeout timeout) {
  const std::vector<ObjectId> ids = IdsOf(refs);
  const auto values = CurrentRuntime().Get(ids, timeout);
  std::vector<T> results;
  results.reserve(values.size());
  for (const auto& value : values) results.push_back(Deserialize<T>(value->bytes(), "an object"));
  return results;
}

template <typename T>
T GetValue(const ObjectRef<T>& ref, Timeout timeout) {
  const ObjectId& id = ref.id();  // an empty ref throws before the runtime is asked
  const auto values = CurrentRuntime().Get({id}, timeout);
  return Deserialize<T>(values.front()->bytes(), "an object");
}

template <typename T>
WaitResult<T> WaitFor(const std::vector<ObjectRef<T>>& refs, std::size_t num_objects,
                      Timeout timeout) {
  const std::vector<ObjectId> ids = IdsOf(refs);  // before the runtime: empty refs throw
  const std::vector<bool> ready = CurrentRuntime().Wait(ids, num_objects, timeout);
  WaitResult<T> result;
  for (std::size_t index = 0; index < refs.size(); ++index) {
    const bool taken = ready[index] && result.ready.size() < num_objects;
    (taken ? result.ready : result.unready).push_back(refs[index]);
  }
  return result;
}

}  // namespace internal

template <typename T>
ObjectRef<T> Put(const T& value) {
  // Counting first lets the value be packed once, straight into its place.
  std::size_t size = 0;
  {
    const internal::ContainedRefsScope counting_only(nullptr);
    size = internal::SerializedSize(value);
  }
  auto builder = internal::CurrentRuntime().CreateObject(size);
  internal::ContainedRefs contained;
  {
    const internal::ContainedRefsScope capture(&contained);
    internal::MemoryStream stream(builder->data());
    msgpack::pack(stream, value);
  }
  return ObjectRef<T>(internal::NewObjectHandle(builder->Seal(std::move(contained))));
}

template <typename T>
T Get(const ObjectRef<T>& ref) {
  return internal::GetValue(ref, std::nullopt);
}
template <typename T>
T Get(const ObjectRef<T>& ref, std::chrono::milliseconds timeout) {
  return internal::GetValue(ref, timeout);
}
template <typename T>
std::vector<T> Get(const std::vector<ObjectRef<T>>& refs) {
  return internal::GetValues(refs, std::nullopt);
}
template <typename T>
std::vector<T> Get(const std::vector<ObjectRef<T>>& refs, std::chrono::milliseconds timeout) {
  return internal::GetValues(refs, timeout);
}

template <typename T>
WaitResult<T> Wait(const std::vector<ObjectRef<T>>& refs, std::size_t num_objects) {
  return internal::WaitFor(refs, num_objects, std::nullopt);
}
template <typename T>
WaitResult<T> Wait(const std::vector<ObjectRef<T>>& refs, std::size_t num_objects,
                   std::chrono::milliseconds timeout) {
  return internal::WaitFor(refs, num_objects, timeout);
}

}  // namespace sray
