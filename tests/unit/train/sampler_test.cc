#include "sray/train/sampler.h"

#include <gtest/gtest.h>

#include <vector>

#include <torch/torch.h>

#include "sray/errors.h"

namespace sray::train {
namespace {

std::vector<std::size_t> Drain(DistributedSampler& sampler) {
  std::vector<std::size_t> seen;
  while (auto batch = sampler.next(7)) seen.insert(seen.end(), batch->begin(), batch->end());
  return seen;
}

// make_data_loader keeps a copy of the sampler: set_epoch on the caller's
// must still change what the loader's copy hands out at its next epoch.
TEST(DistributedSampler, SetEpochReachesACopyAtItsNextReset) {
  DistributedSampler sampler(100, 2, 0, {});
  DistributedSampler copy = sampler;
  copy.reset();
  const auto epoch_zero = Drain(copy);
  EXPECT_EQ(epoch_zero, sampler.indices());
  sampler.set_epoch(1);
  copy.reset();
  const auto epoch_one = Drain(copy);
  EXPECT_NE(epoch_one, epoch_zero);
  EXPECT_EQ(epoch_one, sampler.indices());
}

TEST(DistributedSampler, FeedsADataLoaderEveryEpochADifferentShard) {
  auto dataset = torch::data::datasets::TensorDataset(torch::arange(64).view({64, 1}))
                     .map(torch::data::transforms::Stack<torch::data::TensorExample>());
  DistributedSampler sampler(64, 2, 1, {});
  auto loader = torch::data::make_data_loader(dataset, sampler, 8);
  std::vector<std::vector<std::int64_t>> epochs;
  for (std::uint64_t epoch = 0; epoch < 2; ++epoch) {
    sampler.set_epoch(epoch);
    std::vector<std::int64_t> seen;
    for (auto& batch : *loader) {
      for (std::int64_t row = 0; row < batch.data.size(0); ++row) seen.push_back(batch.data[row][0].item<std::int64_t>());
    }
    EXPECT_EQ(seen.size(), 32U);
    epochs.push_back(seen);
  }
  EXPECT_NE(epochs[0], epochs[1]);
}

// A loader made from std::move(sampler): the moved-from sampler had no epoch
// left, and its set_epoch crashed. It still shares the loader's epoch.
TEST(DistributedSampler, AMovedFromSamplerStillSetsTheLoadersEpoch) {
  DistributedSampler sampler(100, 2, 0, {});
  DistributedSampler taken = std::move(sampler);
  taken.reset();
  const auto epoch_zero = Drain(taken);
  sampler.set_epoch(1);  // NOLINT(bugprone-use-after-move): what the test is about
  EXPECT_EQ(taken.epoch(), 1U);
  taken.reset();
  EXPECT_NE(Drain(taken), epoch_zero);
  DistributedSampler assigned(10, 1, 0, {});
  assigned = std::move(taken);
  taken.set_epoch(2);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(assigned.epoch(), 2U);
}

TEST(DistributedSampler, RefusesARankOutsideTheWorld) {
  EXPECT_THROW(DistributedSampler(10, 2, 2, {}), sray::ConfigError);
  EXPECT_THROW(DistributedSampler(10), sray::Error) << "outside a training worker";
}

}  // namespace
}  // namespace sray::train
