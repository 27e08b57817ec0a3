#pragma once

// PrepareModel makes a LibTorch module data-parallel in place: it moves the
// module to the worker's device, copies rank 0's parameters and buffers to
// every worker, and from then on averages gradients over the workers during
// each backward pass (buckets all-reduced as soon as they are complete, so
// communication overlaps the rest of the backward pass). When backward()
// returns, every parameter's gradient is the average over all workers.
//
//   auto model = sray::train::PrepareModel(torch::nn::Sequential(...));
//   model = sray::train::PrepareModel(model);  // the same module back
//
// Every worker must run forward and backward the same number of times (the
// DistributedSampler gives each the same number of batches). Load
// checkpoints (torch::load) and move or cast the model before PrepareModel:
// torch::load replaces the parameters' gradient accumulators, which a
// DistributedSampler notices and repairs at the next batch, and Report
// refuses to go on when steps were missed. Parameters
// that get no gradient in a step are averaged as zeros where others used
// them, and left alone where nobody did. Buffers (BatchNorm statistics) are
// copied here, and again from rank 0 at each backward pass unless
// TorchConfig::broadcast_buffers is false.

#include <memory>
#include <type_traits>

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

namespace sray::train {
namespace internal {
// Throws sray::Error outside a training worker, and for a module whose
// parameters differ between workers.
void PrepareModule(const std::shared_ptr<torch::nn::Module>& module);
}  // namespace internal

template <typename ModuleType>
ModuleType PrepareModel(ModuleType model) {
  if constexpr (std::is_base_of_v<torch::detail::ModuleHolderIndicator, ModuleType>) {
    internal::PrepareModule(model.ptr());
  } else {
    internal::PrepareModule(std::static_pointer_cast<torch::nn::Module>(model));
  }
  return model;
}

}  // namespace sray::train
