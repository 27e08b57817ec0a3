#pragma once

// Data-parallel gradients, as PyTorch's DistributedDataParallel computes
// them: a hook on each parameter's gradient accumulator copies the gradient
// into its bucket; a complete bucket is divided by the world size and its
// all-reduce started at once (buckets strictly in order, so every worker
// issues the same collectives in the same order); at the end of backward the
// reducer finishes the remaining buckets, waits for all of them and copies
// the averages back into the gradients.
//
// A parameter without a gradient in a step contributes zeros, and each
// bucket carries one "used" flag per parameter: a parameter nobody used
// keeps its gradient as it was (undefined stays undefined, so optimizers
// skip it), one used elsewhere gets the average.
//
// With `buffers`, rank 0's buffers (BatchNorm's running statistics) are
// broadcast at each pass, launched before the first bucket and waited for
// at its end, so every worker's next forward pass starts from rank 0's, as
// DDP's broadcast_buffers gives before each forward pass.
//
// After a step each averaged gradient aliases its place in the bucket (DDP's
// gradient_as_bucket_view): autograd then accumulates into the bucket and
// nothing is copied in or out, unless the optimizer set the gradients to
// none (LibTorch 2's default), when they are copied in again.
//
// Why not c10d::Reducer: it must be told of every forward pass
// (prepare_for_backward, with the outputs when parameters may go unused),
// and a LibTorch C++ module's forward cannot be intercepted (it is not
// virtual), so PrepareModel could not return the user's module unchanged.
//
// Thread-safety: hooks run on autograd's thread for the device; the state is
// guarded by one mutex. Not copyable; keep it alive as long as the module.

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

#include <ATen/core/Tensor.h>

#include "train/collectives.h"

namespace sray::train::internal {

class GradientReducer {
 public:
  // `parameters`: those that require a gradient, in the module's order.
  // `buffers`: those to take from rank 0 at each pass (none: keep each worker's own).
  GradientReducer(std::vector<at::Tensor> parameters, Collectives& collectives,
                  std::size_t first_bucket_bytes, std::size_t bucket_bytes,
                  std::vector<at::Tensor> buffers = {});
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  [[nodiscard]] const std::vector<std::vector<std::size_t>>& buckets() const { return buckets_; }
  // Bytes of each bucket's flat tensor (gradients plus used flags).
  [[nodiscard]] std::vector<std::size_t> BucketBytes() const;

  // Averages the current gradients without a backward pass: every bucket
  // filled, all-reduced and copied back, as the end of a backward pass does
  // with nothing overlapped. For benchmarks (the same path, timed alone) and
  // for loops that compute gradients some other way.
  void SynchronizeNow();

  // False once a parameter's gradient accumulator was replaced (the module
  // was moved to another device or cast after PrepareModel): its gradients
  // would no longer be averaged.
  [[nodiscard]] bool HooksAttached() const;
  // True once a backward pass was interrupted (an exception inside it left
  // buckets half sent): any further collective of this worker would pair
  // with another worker's leftover. Asked between passes.
  [[nodiscard]] bool Interrupted() const;
  // Hooks the accumulators anew where they were replaced without a change of
  // device or type (torch::load into the prepared module does that); throws
  // for a change of device or type. Not during a backward pass.
  void Reattach();

  struct Statistics {
    std::uint64_t steps = 0;
    double communication_seconds = 0;  // first launch to last bucket done, summed over steps
    // Buckets whose all-reduce a gradient hook started while backward still
    // ran (the overlap), and those started only at its end.
    std::uint64_t buckets_launched_during_backward = 0;
    std::uint64_t buckets_launched_at_end = 0;
  };
  [[nodiscard]] Statistics statistics() const;

 private:
  struct Bucket;
  struct BufferGroup;
  void OnGradientReady(std::size_t parameter);
  void LaunchBufferBroadcast();
  void FinishBufferBroadcast();
  void FillAndMaybeLaunch(std::size_t parameter, bool produced);
  void LaunchReadyBuckets();
  void Finish();

  std::vector<at::Tensor> parameters_;
  Collectives& collectives_;
  std::vector<std::vector<std::size_t>> buckets_;
  std::vector<std::unique_ptr<Bucket>> bucket_state_;
  std::vector<std::size_t> bucket_of_;    // parameter -> bucket
  std::vector<std::size_t> position_in_;  // parameter -> index within its bucket
  std::vector<std::unique_ptr<GradientHook>> hooks_;
  std::vector<std::unique_ptr<BufferGroup>> buffer_groups_;  // one per type and device

  mutable std::mutex mutex_;
  bool in_backward_ = false;
  bool broken_ = false;  // a pass was interrupted: every later one fails
  bool finishing_ = false;  // the end of a pass (or SynchronizeNow) fills and launches what is left
  std::size_t next_to_launch_ = 0;
  std::vector<bool> ready_;
  std::chrono::steady_clock::time_point first_launch_;
  Statistics statistics_;
};

}  // namespace sray::train::internal
