#pragma once

// Which samples of a dataset one worker takes in one epoch: the arithmetic
// behind DistributedSampler, kept free of LibTorch so it can be tested alone.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sray::train::internal {

struct ShardSpec {
  std::size_t dataset_size = 0;
  int world_size = 1;
  int world_rank = 0;
  bool shuffle = true;
  std::uint64_t seed = 0;
  std::uint64_t epoch = 0;
  bool drop_last = false;
};

// Every worker computes the same permutation (seeded by seed + epoch), pads
// it by repeating its start until it divides by world_size (or drops the
// tail with drop_last), and takes every world_size-th index from its rank.
std::vector<std::size_t> ShardIndices(const ShardSpec& spec);

}  // namespace sray::train::internal
