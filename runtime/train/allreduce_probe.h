#pragma once

// For bench/train: the time of one step's gradient all-reduce through the
// reducer (its buckets filled, divided, all-reduced and copied back, nothing
// overlapped) next to raw c10d all-reduces of tensors of the same sizes in
// the same group. Call it from inside a training loop, on every worker, after
// PrepareModel; it is a collective.

#include <cstddef>
#include <vector>

namespace sray::train::internal {

struct AllReduceTiming {
  double reducer_seconds_per_step = 0;
  double raw_seconds_per_step = 0;
  std::vector<std::size_t> bucket_bytes;
  double overlapped_seconds_per_step = 0;  // first launch to last done, during training
};

AllReduceTiming MeasureAllReduce(int steps);

}  // namespace sray::train::internal
