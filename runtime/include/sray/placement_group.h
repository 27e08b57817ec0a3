#pragma once

// Placement groups: bundles of resources reserved together, packed onto few
// nodes or spread across many, for actors that must sit in a given layout
// (one training worker per node). After Ray's C++ API.
//
//   auto group = sray::CreatePlacementGroup(
//       {.name = "", .bundles = {{{"CPU", 1}}, {{"CPU", 1}}}, .strategy =
//       sray::PlacementStrategy::kSpread});
//   group.Wait(std::chrono::seconds(10));
//   sray::Actor(Worker::Create).SetPlacementGroup(group, 0).Remote();
//
// Thread-safety: any thread.

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sray/errors.h"
#include "sray/internal/runtime.h"
#include "sray/internal/serialization.h"
#include "sray/placement_strategy.h"

namespace sray {

struct PlacementGroupCreationOptions {
  std::string name;
  std::vector<std::map<std::string, double>> bundles;
  PlacementStrategy strategy = PlacementStrategy::kPack;
};

class PlacementGroup {
 public:
  PlacementGroup() = default;
  explicit PlacementGroup(std::uint64_t id) : id_(id) {}
  [[nodiscard]] std::uint64_t id() const { return id_; }

  // True once every bundle is reserved; false when the timeout passed first.
  // Throws Error when the group was removed.
  [[nodiscard]] bool Wait(std::chrono::milliseconds timeout) const {
    const auto state = internal::CurrentRuntime().WaitPlacementGroup(id_, timeout);
    if (state.removed) throw Error("sray: placement group " + std::to_string(id_) + " was removed");
    return state.placed;
  }
  // The node of each bundle; empty until placed.
  [[nodiscard]] std::vector<std::uint32_t> BundleNodes() const {
    return internal::CurrentRuntime()
        .WaitPlacementGroup(id_, std::chrono::milliseconds(0))
        .bundle_nodes;
  }

  MSGPACK_DEFINE(id_)

 private:
  std::uint64_t id_ = 0;
};

// Throws InfeasibleResourcesError when the bundles could never fit the job's
// nodes with this strategy; otherwise the group is placed as soon as room is
// free (see Wait).
inline PlacementGroup CreatePlacementGroup(const PlacementGroupCreationOptions& options) {
  return PlacementGroup(internal::CurrentRuntime().CreatePlacementGroup(
      options.name, options.bundles, options.strategy));
}

// Frees the bundles; actors placed in the group are killed.
inline void RemovePlacementGroup(const PlacementGroup& group) {
  internal::CurrentRuntime().RemovePlacementGroup(group.id());
}

}  // namespace sray
