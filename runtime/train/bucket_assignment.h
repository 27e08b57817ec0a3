#pragma once

// How gradients are grouped into all-reduce buckets, as PyTorch's DDP does:
// parameters in reverse order (roughly the order backward produces their
// gradients), a bucket closed once it holds at least its cap, the first
// bucket with a smaller cap so that communication starts early. Tensors of
// different kinds (dtype, device) never share a bucket. Free of LibTorch.

#include <cstddef>
#include <vector>

namespace sray::train::internal {

struct BucketParameter {
  std::size_t bytes = 0;
  int kind = 0;  // parameters of different kinds go to different buckets
};

// Buckets of parameter indices, in the order they are launched; every index
// appears exactly once.
std::vector<std::vector<std::size_t>> AssignBuckets(const std::vector<BucketParameter>& parameters,
                                                    std::size_t first_bucket_bytes,
                                                    std::size_t bucket_bytes);

}  // namespace sray::train::internal
