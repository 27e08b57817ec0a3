#include "train/shard.h"

#include <numeric>
#include <random>

namespace sray::train::internal {

std::vector<std::size_t> ShardIndices(const ShardSpec& spec) {
  const auto world = static_cast<std::size_t>(spec.world_size);
  const auto rank = static_cast<std::size_t>(spec.world_rank);
  std::vector<std::size_t> order(spec.dataset_size);
  std::iota(order.begin(), order.end(), std::size_t{0});
  if (spec.shuffle) {
    // Fisher-Yates with a fixed engine, not std::shuffle: the permutation
    // must not depend on the standard library that built each worker.
    std::mt19937_64 engine(spec.seed + spec.epoch);
    for (std::size_t index = order.size(); index > 1; --index) {
      const auto other = static_cast<std::size_t>(engine() % index);
      std::swap(order[index - 1], order[other]);
    }
  }
  std::size_t total = 0;
  if (spec.drop_last) {
    total = (order.size() / world) * world;
    order.resize(total);
  } else {
    total = (order.size() + world - 1) / world * world;
    for (std::size_t index = 0; order.size() < total && !order.empty(); ++index) {
      order.push_back(order[index % spec.dataset_size]);
    }
  }
  std::vector<std::size_t> shard;
  shard.reserve(total / world);
  for (std::size_t index = rank; index < order.size(); index += world) shard.push_back(order[index]);
  return shard;
}

}  // namespace sray::train::internal
