#pragma once

// A sampler for torch::data::make_data_loader that gives each worker its own
// share of a dataset, like PyTorch's DistributedSampler: each epoch, one
// permutation (seeded by seed + epoch, the same on every worker) is padded
// by repeating its start until it divides evenly, and worker r takes every
// world_size-th index from r. Shards are disjoint apart from that padding,
// equal in size (so every worker runs the same number of steps), and change
// with set_epoch. With drop_last the tail is dropped instead of padded.
//
// The indices it hands out are counted towards the samples/s the trainer
// prints. make_data_loader keeps a copy of the sampler: copies share their
// epoch, so set_epoch on the caller's sampler reaches the loader's copy (it
// takes effect when the loader starts the next epoch).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <c10/util/Optional.h>
#include <torch/data/samplers/base.h>

namespace sray::train {

class DistributedSampler : public torch::data::samplers::Sampler<std::vector<std::size_t>> {
 public:
  struct Options {
    bool shuffle = true;
    std::uint64_t seed = 0;
    bool drop_last = false;
  };
  // Sharded by GetContext(): throws sray::Error outside a training worker.
  explicit DistributedSampler(std::size_t dataset_size) : DistributedSampler(dataset_size, Options{}) {}
  DistributedSampler(std::size_t dataset_size, Options options);
  // Explicit layout, for use outside the trainer.
  DistributedSampler(std::size_t dataset_size, int world_size, int world_rank, Options options);
  // A move copies, so that the sampler a loader was made from with
  // std::move still shares its epoch: set_epoch on it then reaches the
  // loader (a moved-from sampler had no epoch, and set_epoch crashed).
  ~DistributedSampler() override = default;
  DistributedSampler(const DistributedSampler&) = default;
  DistributedSampler& operator=(const DistributedSampler&) = default;
  DistributedSampler(DistributedSampler&& other) : DistributedSampler(std::as_const(other)) {}
  DistributedSampler& operator=(DistributedSampler&& other) { return *this = std::as_const(other); }

  void set_epoch(std::uint64_t epoch);
  [[nodiscard]] std::uint64_t epoch() const { return *epoch_; }
  // Indices of this worker's shard for the current epoch, in order.
  [[nodiscard]] const std::vector<std::size_t>& indices();

  void reset(c10::optional<std::size_t> new_size = c10::nullopt) override;
  c10::optional<std::vector<std::size_t>> next(std::size_t batch_size) override;
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;

 private:
  // Recomputes the shard when the shared epoch or the size changed.
  void ShardIfStale();

  std::size_t dataset_size_;
  int world_size_;
  int world_rank_;
  Options options_;
  std::shared_ptr<std::uint64_t> epoch_;  // shared by copies
  std::uint64_t sharded_epoch_ = 0;
  std::size_t sharded_size_ = 0;
  bool sharded_ = false;
  std::vector<std::size_t> indices_;
  std::size_t position_ = 0;
};

}  // namespace sray::train
