#include "train/gradient_reducer.h"

#include <algorithm>
#include <iterator>
#include <stdexcept>
#include <string>
#include <utility>

#include <ATen/ATen.h>

#include "train/bucket_assignment.h"

namespace sray::train::internal {

// Views into `flat` are made once: a step then runs no ATen operation per
// parameter besides the copy of a gradient that is not an alias yet.
struct GradientReducer::Bucket {
  std::vector<std::size_t> parameters;
  std::vector<std::int64_t> offsets;  // element offset of each parameter's gradient
  std::int64_t gradient_elements = 0;  // the used flags follow
  at::Tensor flat;
  std::vector<at::Tensor> regions;  // each parameter's place in `flat`, flattened
  at::Tensor flags;                 // the used flags' place in `flat`
  float* host_flags = nullptr;      // the same, when `flat` is float on the CPU
  std::vector<float> used;          // this pass's used flag per parameter
  std::size_t pending = 0;
  bool launched = false;
  c10::intrusive_ptr<c10d::Work> work;
};

// Buffers of one type and device, broadcast from rank 0 as one flat tensor.
struct GradientReducer::BufferGroup {
  std::vector<at::Tensor> buffers;
  std::vector<std::int64_t> offsets;
  at::Tensor flat;
  c10::intrusive_ptr<c10d::Work> work;
};

namespace {

// Scales a bucket to the average before it is summed. A power of two is
// multiplied by its reciprocal: the same result bit for bit as the
// division DDP does, at a fraction of its cost on the CPU.
void ScaleToAverage(at::Tensor& flat, int world_size) {
  const bool power_of_two = world_size > 0 && (world_size & (world_size - 1)) == 0;
  if (power_of_two) {
    flat.mul_(1.0 / world_size);
  } else {
    flat.div_(world_size);
  }
}

}  // namespace

GradientReducer::GradientReducer(std::vector<at::Tensor> parameters, Collectives& collectives,
                                 std::size_t first_bucket_bytes, std::size_t bucket_bytes,
                                 std::vector<at::Tensor> buffers)
    : parameters_(std::move(parameters)), collectives_(collectives) {
  for (at::Tensor& buffer : buffers) {
    if (!buffer.defined() || buffer.numel() == 0) continue;
    if (buffer.is_sparse()) {
      throw std::invalid_argument(
          "sray: PrepareModel cannot broadcast a sparse buffer: make it dense (to_dense()) before "
          "PrepareModel, or keep it out of the module's buffers");
    }
    auto group = std::find_if(buffer_groups_.begin(), buffer_groups_.end(), [&](const auto& candidate) {
      const at::Tensor& first = candidate->buffers.front();
      return first.scalar_type() == buffer.scalar_type() && first.device() == buffer.device();
    });
    if (group == buffer_groups_.end()) {
      buffer_groups_.push_back(std::make_unique<BufferGroup>());
      group = std::prev(buffer_groups_.end());
    }
    BufferGroup& into = **group;
    into.offsets.push_back(into.buffers.empty() ? 0 : into.offsets.back() + into.buffers.back().numel());
    into.buffers.push_back(std::move(buffer));
  }
  for (auto& group : buffer_groups_) {
    const at::Tensor& last = group->buffers.back();
    group->flat = at::empty({group->offsets.back() + last.numel()}, last.options().requires_grad(false));
  }
  std::vector<BucketParameter> sizes;
  sizes.reserve(parameters_.size());
  for (const at::Tensor& parameter : parameters_) {
    if (parameter.is_sparse()) {
      throw std::invalid_argument(
          "sray: PrepareModel cannot average a sparse parameter: make the model's parameters "
          "dense");
    }
    const int kind = static_cast<int>(parameter.scalar_type()) * 4096 +
                     static_cast<int>(parameter.device().type()) * 256 + parameter.device().index() + 1;
    sizes.push_back({static_cast<std::size_t>(parameter.numel() * static_cast<std::int64_t>(parameter.element_size())), kind});
  }
  buckets_ = AssignBuckets(sizes, first_bucket_bytes, bucket_bytes);
  bucket_of_.assign(parameters_.size(), 0);
  position_in_.assign(parameters_.size(), 0);
  ready_.assign(parameters_.size(), false);
  for (std::size_t index = 0; index < buckets_.size(); ++index) {
    auto bucket = std::make_unique<Bucket>();
    bucket->parameters = buckets_[index];
    for (std::size_t position = 0; position < bucket->parameters.size(); ++position) {
      const std::size_t parameter = bucket->parameters[position];
      bucket_of_[parameter] = index;
      position_in_[parameter] = position;
      bucket->offsets.push_back(bucket->gradient_elements);
      bucket->gradient_elements += parameters_[parameter].numel();
    }
    const at::Tensor& first = parameters_[bucket->parameters.front()];
    bucket->flat = at::zeros({bucket->gradient_elements + static_cast<std::int64_t>(bucket->parameters.size())},
                             first.options().requires_grad(false));
    for (std::size_t position = 0; position < bucket->parameters.size(); ++position) {
      bucket->regions.push_back(
          bucket->flat.narrow(0, bucket->offsets[position], parameters_[bucket->parameters[position]].numel()));
    }
    bucket->flags = bucket->flat.narrow(0, bucket->gradient_elements, static_cast<std::int64_t>(bucket->parameters.size()));
    if (bucket->flat.is_cpu() && bucket->flat.scalar_type() == at::kFloat) {
      bucket->host_flags = bucket->flags.data_ptr<float>();
    }
    bucket->pending = bucket->parameters.size();
    bucket->used.assign(bucket->parameters.size(), 0.0F);
    bucket_state_.push_back(std::move(bucket));
  }
  hooks_.reserve(parameters_.size());
  for (std::size_t index = 0; index < parameters_.size(); ++index) {
    hooks_.push_back(std::make_unique<GradientHook>(parameters_[index], [this, index] { OnGradientReady(index); }));
  }
}

GradientReducer::~GradientReducer() = default;

std::vector<std::size_t> GradientReducer::BucketBytes() const {
  std::vector<std::size_t> bytes;
  for (const auto& bucket : bucket_state_) {
    bytes.push_back(static_cast<std::size_t>(bucket->flat.numel() * static_cast<std::int64_t>(bucket->flat.element_size())));
  }
  return bytes;
}

GradientReducer::Statistics GradientReducer::statistics() const {
  std::lock_guard lock(mutex_);
  return statistics_;
}

void GradientReducer::OnGradientReady(std::size_t parameter) {
  std::lock_guard lock(mutex_);
  if (broken_) {
    throw std::runtime_error(
        "sray: gradient averaging is out of step: an earlier backward pass on this worker was interrupted "
        "by an exception, so its buckets never completed: end the training loop (the trainer restarts the "
        "group when max_failures allows)");
  }
  // A gradient twice in one pass: the pass before it never reached its end
  // (an exception inside backward), and its buckets are half sent. Going on
  // would pair different collectives across workers.
  if (in_backward_ && ready_[parameter]) {
    broken_ = true;
    throw std::runtime_error(
        "sray: a backward pass on this worker was interrupted by an exception and left gradient buckets "
        "half sent: gradients can no longer be averaged in step with the other workers; end the training "
        "loop (the trainer restarts the group when max_failures allows)");
  }
  if (!in_backward_) {
    in_backward_ = true;
    AtEndOfBackward([this] { Finish(); });
    try {
      LaunchBufferBroadcast();
    } catch (...) {
      // The pass ends here and its end-of-backward callback with it: the
      // next pass must not pair its collectives with what was started.
      broken_ = true;
      throw;
    }
  }
  FillAndMaybeLaunch(parameter, true);
}

// Called with mutex_ held. `produced`: this pass gave the parameter a
// gradient (else it contributes zeros, whatever its stale gradient holds).
void GradientReducer::FillAndMaybeLaunch(std::size_t parameter, bool produced) {
  if (ready_[parameter]) return;
  ready_[parameter] = true;
  Bucket& bucket = *bucket_state_[bucket_of_[parameter]];
  const std::size_t position = position_in_[parameter];
  const at::Tensor& gradient = parameters_[parameter].grad();
  at::Tensor& region = bucket.regions[position];
  if (produced && gradient.defined()) {
    if (gradient.is_sparse()) {
      throw std::invalid_argument(
          "sray: a backward pass produced a sparse gradient, which PrepareModel cannot average: "
          "use layers with dense gradients (torch::nn::Embedding without sparse(true))");
    }
    // After the first step the gradient is a view of its bucket (see
    // Finish) and autograd accumulated into the bucket already: no copy.
    if (gradient.data_ptr() != region.data_ptr() || !gradient.is_contiguous()) region.copy_(gradient.reshape({-1}));
    bucket.used[position] = 1.0F;
  } else {
    // An alias of the region is the user's gradient: keep a copy of it
    // before the region is zeroed (it stays as it was if nobody used it).
    if (gradient.defined() && gradient.data_ptr() == region.data_ptr()) {
      parameters_[parameter].mutable_grad() = gradient.clone();
    }
    region.zero_();
    bucket.used[position] = 0.0F;
  }
  --bucket.pending;
  LaunchReadyBuckets();
}

// Called with mutex_ held. Strictly in bucket order: Gloo and NCCL match
// collectives by the order each rank issues them.
void GradientReducer::LaunchReadyBuckets() {
  while (next_to_launch_ < bucket_state_.size() && bucket_state_[next_to_launch_]->pending == 0) {
    Bucket& bucket = *bucket_state_[next_to_launch_++];
    if (next_to_launch_ == 1) first_launch_ = std::chrono::steady_clock::now();
    if (bucket.host_flags != nullptr) {
      std::copy(bucket.used.begin(), bucket.used.end(), bucket.host_flags);
    } else {
      const auto flags = static_cast<std::int64_t>(bucket.used.size());
      bucket.flags.copy_(at::from_blob(bucket.used.data(), {flags}, at::kFloat).to(bucket.flat.scalar_type()));
    }
    ScaleToAverage(bucket.flat, collectives_.world_size());
    bucket.work = collectives_.StartAllReduceSum(bucket.flat);
    bucket.launched = true;
    if (in_backward_ && !finishing_) {
      ++statistics_.buckets_launched_during_backward;
    } else {
      ++statistics_.buckets_launched_at_end;
    }
  }
}

// Called with mutex_ held, before any bucket of the pass: every rank issues
// the broadcasts first.
void GradientReducer::LaunchBufferBroadcast() {
  at::NoGradGuard no_grad;
  for (auto& group : buffer_groups_) {
    if (collectives_.rank() == 0) {
      for (std::size_t index = 0; index < group->buffers.size(); ++index) {
        const at::Tensor& buffer = group->buffers[index];
        group->flat.narrow(0, group->offsets[index], buffer.numel()).copy_(buffer.reshape({-1}));
      }
    }
    group->work = collectives_.StartBroadcast(group->flat, 0);
  }
}

// Called with mutex_ held. Throws the broadcast's error.
void GradientReducer::FinishBufferBroadcast() {
  at::NoGradGuard no_grad;
  for (auto& group : buffer_groups_) {
    if (!group->work) continue;
    Collectives::Wait(group->work);
    group->work.reset();
    if (collectives_.rank() == 0) continue;
    for (std::size_t index = 0; index < group->buffers.size(); ++index) {
      at::Tensor& buffer = group->buffers[index];
      const at::Tensor rank0 = group->flat.narrow(0, group->offsets[index], buffer.numel()).view(buffer.sizes());
      // Equal ones (eval mode, or no update) stay untouched: a copy would
      // bump their version, and a graph kept with retain_graph that saved
      // them (BatchNorm in eval mode) would refuse a second backward.
      if (!at::equal(buffer, rank0)) buffer.copy_(rank0);
    }
  }
}

void GradientReducer::Finish() {
  std::unique_lock lock(mutex_);
  auto reset = [this] {
    in_backward_ = false;
    finishing_ = false;
    next_to_launch_ = 0;
    ready_.assign(parameters_.size(), false);
    for (auto& bucket : bucket_state_) {
      bucket->pending = bucket->parameters.size();
      bucket->launched = false;
      bucket->work.reset();
    }
  };
  finishing_ = true;
  try {
    // Parameters that got no gradient in this pass contribute zeros.
    for (std::size_t index = 0; index < parameters_.size(); ++index) {
      if (!ready_[index]) FillAndMaybeLaunch(index, false);
    }
    FinishBufferBroadcast();
    for (auto& bucket : bucket_state_) Collectives::Wait(bucket->work);
  } catch (...) {
    // Wait for whatever was started before giving up: Gloo still writes
    // into the buckets until its work ends.
    std::vector<c10::intrusive_ptr<c10d::Work>> started;
    for (auto& group : buffer_groups_) started.push_back(std::move(group->work));
    for (auto& bucket : bucket_state_) started.push_back(bucket->work);
    for (auto& work : started) {
      if (!work) continue;
      try {
        Collectives::Wait(work);
      } catch (...) {  // NOLINT(bugprone-empty-catch): the first error is the one rethrown
      }
    }
    reset();
    throw;
  }
  for (auto& bucket : bucket_state_) {
    at::Tensor used;  // a host copy, unless the flags are host floats already
    const float* used_by = bucket->host_flags;
    if (used_by == nullptr) {
      used = bucket->flags.to(at::kCPU, at::kFloat);
      used_by = used.data_ptr<float>();
    }
    for (std::size_t position = 0; position < bucket->parameters.size(); ++position) {
      if (used_by[position] <= 0) continue;  // nobody used it: its gradient stays as it was
      at::Tensor& parameter = parameters_[bucket->parameters[position]];
      // The gradient becomes an alias of its place in the bucket, so that the
      // next backward pass accumulates straight into it (as DDP's
      // gradient_as_bucket_view). An alias made with set_, not a view:
      // LibTorch 1.13's Optimizer::zero_grad calls detach_(), which views refuse.
      at::Tensor& gradient = parameter.mutable_grad();
      if (gradient.defined() && gradient.data_ptr() == bucket->regions[position].data_ptr()) continue;
      at::Tensor alias = at::empty({0}, bucket->flat.options());
      alias.set_(bucket->flat.storage(), bucket->flat.storage_offset() + bucket->offsets[position], parameter.sizes());
      gradient = alias;
    }
  }
  ++statistics_.steps;
  statistics_.communication_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - first_launch_).count();
  reset();
}

bool GradientReducer::Interrupted() const {
  std::lock_guard lock(mutex_);
  // Between passes a pass still under way never reached its end.
  return broken_ || in_backward_;
}

bool GradientReducer::HooksAttached() const {
  std::lock_guard lock(mutex_);
  for (std::size_t index = 0; index < parameters_.size(); ++index) {
    if (!hooks_[index]->AttachedTo(parameters_[index])) return false;
  }
  return true;
}

void GradientReducer::Reattach() {
  std::lock_guard lock(mutex_);
  for (std::size_t index = 0; index < parameters_.size(); ++index) {
    if (hooks_[index]->AttachedTo(parameters_[index])) continue;
    const at::Tensor& parameter = parameters_[index];
    const at::Tensor& flat = bucket_state_[bucket_of_[index]]->flat;
    if (parameter.scalar_type() != flat.scalar_type() || parameter.device() != flat.device()) {
      throw std::runtime_error(
          "sray: the model was moved to another device or cast to another type after PrepareModel: move or "
          "cast it first, then call PrepareModel");
    }
    hooks_[index] = std::make_unique<GradientHook>(parameter, [this, index] { OnGradientReady(index); });
  }
}

void GradientReducer::SynchronizeNow() {
  {
    std::lock_guard lock(mutex_);
    if (in_backward_) throw std::logic_error("SynchronizeNow during a backward pass");
    LaunchBufferBroadcast();
    for (std::size_t index = 0; index < parameters_.size(); ++index) {
      FillAndMaybeLaunch(index, parameters_[index].grad().defined());
    }
  }
  Finish();
}

}  // namespace sray::train::internal
