#include "sray/train/sampler.h"

#include <algorithm>
#include <string>

#include <torch/serialize/archive.h>
#include <torch/types.h>

#include "sray/errors.h"
#include "sray/train/context.h"
#include "train/session_state.h"
#include "train/shard.h"

namespace sray::train {

DistributedSampler::DistributedSampler(std::size_t dataset_size, Options options)
    : DistributedSampler(dataset_size, GetContext().GetWorldSize(), GetContext().GetWorldRank(), options) {}

DistributedSampler::DistributedSampler(std::size_t dataset_size, int world_size, int world_rank,
                                       Options options)
    : dataset_size_(dataset_size),
      world_size_(world_size),
      world_rank_(world_rank),
      options_(options),
      epoch_(std::make_shared<std::uint64_t>(0)) {
  if (world_size < 1 || world_rank < 0 || world_rank >= world_size) {
    throw ConfigError("sray: DistributedSampler: rank " + std::to_string(world_rank) +
                      " does not fit a world of " + std::to_string(world_size) +
                      ": the rank must be in [0, world_size)");
  }
  ShardIfStale();
}

void DistributedSampler::set_epoch(std::uint64_t epoch) {
  *epoch_ = epoch;
  ShardIfStale();
  position_ = 0;
}

void DistributedSampler::ShardIfStale() {
  if (sharded_ && sharded_epoch_ == *epoch_ && sharded_size_ == dataset_size_) return;
  indices_ = internal::ShardIndices({dataset_size_, world_size_, world_rank_, options_.shuffle,
                                     options_.seed, *epoch_, options_.drop_last});
  sharded_ = true;
  sharded_epoch_ = *epoch_;
  sharded_size_ = dataset_size_;
  position_ = 0;
}

const std::vector<std::size_t>& DistributedSampler::indices() {
  ShardIfStale();
  return indices_;
}

// The data loader calls this at the start of every epoch, on its own copy.
void DistributedSampler::reset(c10::optional<std::size_t> new_size) {
  if (new_size) dataset_size_ = *new_size;
  ShardIfStale();
  position_ = 0;
}

// A new epoch takes effect at the next reset, as PyTorch's sampler takes it
// at the next iteration, not in the middle of one.
c10::optional<std::vector<std::size_t>> DistributedSampler::next(std::size_t batch_size) {
  if (!sharded_) ShardIfStale();
  if (position_ >= indices_.size()) return c10::nullopt;
  const std::size_t end = std::min(indices_.size(), position_ + batch_size);
  std::vector<std::size_t> batch(indices_.begin() + static_cast<std::ptrdiff_t>(position_),
                                 indices_.begin() + static_cast<std::ptrdiff_t>(end));
  position_ = end;
  if (auto session = internal::CurrentSessionOrNull()) {
    session->samples += batch.size();
    internal::ReattachGradientHooks(*session);
  }
  return batch;
}

void DistributedSampler::save(torch::serialize::OutputArchive& archive) const {
  archive.write("epoch", torch::tensor(static_cast<std::int64_t>(*epoch_)), /*is_buffer=*/true);
  archive.write("position", torch::tensor(static_cast<std::int64_t>(position_)), /*is_buffer=*/true);
}

void DistributedSampler::load(torch::serialize::InputArchive& archive) {
  torch::Tensor epoch = torch::empty(1, torch::kInt64);
  torch::Tensor position = torch::empty(1, torch::kInt64);
  archive.read("epoch", epoch, /*is_buffer=*/true);
  archive.read("position", position, /*is_buffer=*/true);
  set_epoch(static_cast<std::uint64_t>(epoch.item<std::int64_t>()));
  position_ = std::min(indices_.size(), static_cast<std::size_t>(position.item<std::int64_t>()));
}

}  // namespace sray::train
