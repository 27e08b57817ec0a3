// Gradients under the reducer equal the single-process gradient of the
// concatenated batch. Each rank is a thread with its own Gloo process group
// (real Gloo, over loopback TCP) meeting through one in-process HashStore.

#include "train/gradient_reducer.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <ATen/Parallel.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/torch.h>

#include "../test_files.h"
#include "train/collectives.h"

namespace sray::train::internal {
namespace {

struct NetImpl : torch::nn::Module {
  NetImpl()
      : first(register_module("first", torch::nn::Linear(6, 16))),
        second(register_module("second", torch::nn::Linear(16, 16))),
        sometimes(register_module("sometimes", torch::nn::Linear(16, 3))),
        never(register_module("never", torch::nn::Linear(16, 3))),
        last(register_module("last", torch::nn::Linear(16, 3))) {}
  // `use_sometimes`: a branch only some ranks take; `never` is used by none.
  torch::Tensor forward(const torch::Tensor& input, bool use_sometimes) {
    auto hidden = torch::tanh(second->forward(torch::tanh(first->forward(input))));
    auto output = last->forward(hidden);
    if (use_sometimes) output = output + sometimes->forward(hidden);
    return output;
  }
  torch::nn::Linear first, second, sometimes, never, last;
};
TORCH_MODULE(Net);

Net MakeNet() {
  torch::manual_seed(11);
  return Net();
}

// One slice of the batch per rank; the loss of each is its mean, so the
// average over ranks is the loss of the whole batch.
torch::Tensor Loss(Net& net, const torch::Tensor& inputs, const torch::Tensor& targets, bool use_sometimes) {
  return torch::nn::functional::mse_loss(net->forward(inputs, use_sometimes), targets);
}

void RunRanks(int world, const std::function<void(int, Collectives&)>& body) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::thread> ranks;
  std::vector<std::string> errors(static_cast<std::size_t>(world));
  for (int rank = 0; rank < world; ++rank) {
    ranks.emplace_back([&, rank] {
      try {
        at::set_num_threads(1);
        auto collectives = Collectives::OverStore(store, rank, world, std::chrono::seconds(60));
        body(rank, *collectives);
      } catch (const std::exception& error) {
        errors[static_cast<std::size_t>(rank)] = error.what();
      }
    });
  }
  for (auto& rank : ranks) rank.join();
  for (int rank = 0; rank < world; ++rank) EXPECT_EQ(errors[static_cast<std::size_t>(rank)], "") << "rank " << rank;
}

// How gradients are cleared between steps: set to none (LibTorch 2's
// zero_grad) or zeroed in place (1.13's), which keeps them views of the
// reducer's buckets.
enum class Clearing { kSetToNone, kZeroInPlace };

void ExpectAveragedGradientsMatch(int world, Clearing clearing = Clearing::kSetToNone) {
  const std::int64_t per_rank = 8;
  torch::manual_seed(5);
  const auto inputs = torch::randn({per_rank * world, 6});
  const auto targets = torch::randn({per_rank * world, 3});
  auto slice = [&](int rank, const torch::Tensor& tensor) { return tensor.narrow(0, rank * per_rank, per_rank); };

  // The reference: one process, the average of every rank's loss (rank 0
  // alone takes the `sometimes` branch).
  Net reference = MakeNet();
  torch::Tensor total = torch::zeros({});
  for (int rank = 0; rank < world; ++rank) total = total + Loss(reference, slice(rank, inputs), slice(rank, targets), rank == 0);
  (total / world).backward();

  std::vector<std::vector<torch::Tensor>> gradients(static_cast<std::size_t>(world));
  // Made here, one after the other: the seed is global, threads would race for it.
  std::vector<Net> nets;
  for (int rank = 0; rank < world; ++rank) nets.push_back(MakeNet());
  RunRanks(world, [&](int rank, Collectives& collectives) {
    Net& net = nets[static_cast<std::size_t>(rank)];
    std::vector<at::Tensor> parameters = net->parameters();
    // Tiny buckets: several of them, launched during backward.
    GradientReducer reducer(parameters, collectives, 64, 512);
    EXPECT_GE(reducer.buckets().size(), 3U);
    for (int step = 0; step < 3; ++step) {  // later steps check the reducer resets
      for (auto& parameter : parameters) {
        if (clearing == Clearing::kSetToNone || !parameter.grad().defined()) {
          parameter.mutable_grad() = torch::Tensor();
        } else {
          parameter.mutable_grad().zero_();
        }
      }
      Loss(net, slice(rank, inputs), slice(rank, targets), rank == 0).backward();
    }
    EXPECT_EQ(reducer.statistics().steps, 3U) << "the end of each backward pass was seen";
    for (const auto& parameter : parameters) {
      gradients[static_cast<std::size_t>(rank)].push_back(parameter.grad().defined() ? parameter.grad().clone()
                                                                                     : torch::Tensor());
    }
  });

  const auto named = reference->named_parameters();
  for (int rank = 0; rank < world; ++rank) {
    ASSERT_EQ(gradients[static_cast<std::size_t>(rank)].size(), named.size());
    for (std::size_t index = 0; index < named.size(); ++index) {
      const auto& expected = named[index].value().grad();
      const auto& actual = gradients[static_cast<std::size_t>(rank)][index];
      ASSERT_EQ(actual.defined(), expected.defined()) << named[index].key() << " on rank " << rank;
      if (!expected.defined()) continue;  // `never`: nobody used it, so no gradient
      EXPECT_TRUE(torch::allclose(actual, expected, 1e-5, 1e-6))
          << named[index].key() << " on rank " << rank << ": " << (actual - expected).abs().max().item<double>();
    }
  }
}

TEST(GradientReducer, TwoWorkersGetTheGradientOfTheWholeBatch) { ExpectAveragedGradientsMatch(2); }

// The overlap: with every parameter used, each bucket's all-reduce starts
// from a gradient hook while backward still runs, none waits for its end.
TEST(GradientReducer, EveryBucketIsLaunchedWhileBackwardStillRunsWhenAllParametersAreUsed) {
  RunRanks(2, [&](int rank, Collectives& collectives) {
    torch::manual_seed(3);
    torch::nn::Sequential net(torch::nn::Linear(6, 16), torch::nn::Tanh(),
                              torch::nn::Linear(16, 16), torch::nn::Tanh(),
                              torch::nn::Linear(16, 3));
    std::vector<at::Tensor> parameters = net->parameters();
    GradientReducer reducer(parameters, collectives, 64, 512);
    const std::size_t buckets = reducer.buckets().size();
    EXPECT_GE(buckets, 3U);
    // The first layer's weight gets its gradient last: by then the buckets
    // of the later layers must have gone (launched from their hooks, not
    // all from the last one).
    std::uint64_t launched_before_the_first_layer = 0;
    parameters.front().register_hook([&](const at::Tensor& gradient) {
      launched_before_the_first_layer = reducer.statistics().buckets_launched_during_backward;
      return gradient;
    });
    torch::manual_seed(static_cast<std::uint64_t>(20 + rank));
    for (int step = 0; step < 2; ++step) {
      net->zero_grad();
      net->forward(torch::randn({4, 6})).sum().backward();
    }
    const auto statistics = reducer.statistics();
    EXPECT_EQ(statistics.buckets_launched_during_backward, 2 * buckets) << "rank " << rank;
    EXPECT_EQ(statistics.buckets_launched_at_end, 0U) << "rank " << rank;
    EXPECT_GE(launched_before_the_first_layer, buckets + 1)
        << "rank " << rank << ": the second pass had launched none before its last gradient";
  });
}

// A parameter nobody used holds its bucket, and the buckets after it, until
// the end of backward; the ones before it still go early.
TEST(GradientReducer, BucketsBehindAnUnusedParameterWaitForTheEndOfBackward) {
  RunRanks(2, [&](int rank, Collectives& collectives) {
    torch::manual_seed(3);
    Net net;
    std::vector<at::Tensor> parameters = net->parameters();
    GradientReducer reducer(parameters, collectives, 64, 512);
    torch::manual_seed(static_cast<std::uint64_t>(20 + rank));
    net->zero_grad();
    net->forward(torch::randn({4, 6}), true).sum().backward();
    const auto statistics = reducer.statistics();
    EXPECT_GE(statistics.buckets_launched_during_backward, 1U) << "rank " << rank;
    EXPECT_GE(statistics.buckets_launched_at_end, 1U)
        << "rank " << rank << ": `never` got no gradient";
    EXPECT_EQ(statistics.buckets_launched_during_backward + statistics.buckets_launched_at_end,
              reducer.buckets().size());
  });
}

TEST(GradientReducer, ThreeWorkersGetTheGradientOfTheWholeBatch) { ExpectAveragedGradientsMatch(3); }

TEST(GradientReducer, GradientsZeroedInPlaceAccumulateStraightIntoTheBuckets) {
  ExpectAveragedGradientsMatch(2, Clearing::kZeroInPlace);
}

TEST(GradientReducer, SynchronizeNowAveragesWithoutABackwardPass) {
  RunRanks(2, [](int rank, Collectives& collectives) {
    auto weight = torch::zeros({4}, torch::requires_grad());
    GradientReducer reducer({weight}, collectives, 1U << 20U, 1U << 20U);
    weight.mutable_grad() = torch::full({4}, static_cast<float>(rank + 1));
    reducer.SynchronizeNow();
    EXPECT_TRUE(torch::allclose(weight.grad(), torch::full({4}, 1.5F)));
  });
}

// torch::load into a prepared module replaces its parameters' gradient
// accumulators (InputArchive::read uses set_): the hooks go with them, and
// gradients would silently stop being averaged. Reattach hooks them again.
TEST(GradientReducer, HooksLostToTorchLoadAreNoticedAndAttachedAgain) {
  sray::testing::ScratchDirectory scratch;
  const std::string saved = (scratch.path() / "net.pt").string();
  {
    Net original = MakeNet();
    torch::save(original, saved);
  }
  std::vector<Net> nets;
  for (int rank = 0; rank < 2; ++rank) nets.push_back(MakeNet());
  RunRanks(2, [&](int rank, Collectives& collectives) {
    Net& net = nets[static_cast<std::size_t>(rank)];
    GradientReducer reducer(net->parameters(), collectives, 1U << 20U, 1U << 20U);
    torch::load(net, saved);
    EXPECT_FALSE(reducer.HooksAttached());
    reducer.Reattach();
    EXPECT_TRUE(reducer.HooksAttached());
    auto weight = net->last->weight;
    weight.mutable_grad() = torch::Tensor();
    (net->forward(torch::ones({2, 6}), false).sum() * static_cast<float>(rank + 1)).backward();
    // Rank 1's loss is twice rank 0's: the average is 1.5 times rank 0's own.
    auto single = MakeNet();
    torch::load(single, saved);
    (single->forward(torch::ones({2, 6}), false).sum() * 1.5F).backward();
    EXPECT_TRUE(torch::allclose(weight.grad(), single->last->weight.grad(), 1e-5, 1e-6));
  });
}

// An exception inside backward (here a hook on an activation) ends the pass
// after some buckets were sent: the reducer never saw its end. Going on
// would pair one rank's next bucket with another's leftover, so every later
// pass fails, naming why, instead of averaging the wrong gradients or hanging.
TEST(GradientReducer, APassInterruptedByAnExceptionFailsEveryLaterPass) {
  std::vector<Net> nets;
  for (int rank = 0; rank < 2; ++rank) nets.push_back(MakeNet());
  RunRanks(2, [&](int rank, Collectives& collectives) {
    Net& net = nets[static_cast<std::size_t>(rank)];
    GradientReducer reducer(net->parameters(), collectives, 64, 512);
    const auto input = torch::ones({2, 6});
    auto hidden = torch::tanh(net->second->forward(torch::tanh(net->first->forward(input))));
    hidden.register_hook([](const torch::Tensor&) { throw std::runtime_error("a hook fails mid-backward"); });
    EXPECT_FALSE(reducer.Interrupted());
    try {
      net->last->forward(hidden).sum().backward();
      ADD_FAILURE() << "the hook's exception did not end backward";
    } catch (const std::exception& error) {
      EXPECT_NE(std::string(error.what()).find("a hook fails mid-backward"), std::string::npos) << error.what();
    }
    // What Report asks before its own collectives (a loop that caught the
    // exception and reported next went on to pair them with buckets).
    EXPECT_TRUE(reducer.Interrupted());
    for (int pass = 0; pass < 2; ++pass) {
      try {
        net->forward(input, false).sum().backward();
        ADD_FAILURE() << "pass " << pass << " after the interrupted one went on";
      } catch (const std::exception& error) {
        EXPECT_NE(std::string(error.what()).find("interrupted"), std::string::npos) << error.what();
      }
    }
    EXPECT_EQ(reducer.statistics().steps, 0U) << "no pass was averaged";
  });
}

// BatchNorm's running statistics follow each worker's own data in forward;
// with its buffers given, the reducer gives every worker rank 0's at each
// backward pass (DDP's broadcast_buffers), so the next forward starts alike.
TEST(GradientReducer, RankZerosBuffersReachEveryWorkerAtEachBackwardPass) {
  std::vector<torch::nn::Sequential> nets;
  for (int rank = 0; rank < 2; ++rank) {
    torch::manual_seed(3);
    nets.emplace_back(torch::nn::Linear(4, 4), torch::nn::BatchNorm1d(4));
  }
  RunRanks(2, [&](int rank, Collectives& collectives) {
    torch::nn::Sequential& net = nets[static_cast<std::size_t>(rank)];
    GradientReducer reducer(net->parameters(), collectives, 1U << 20U, 1U << 20U, net->buffers());
    auto* norm = net[1]->as<torch::nn::BatchNorm1d>();
    for (int step = 0; step < 2; ++step) {
      // Each rank's own data: the statistics differ after forward.
      const auto input = torch::arange(32, torch::kFloat).view({8, 4}) * static_cast<float>(rank + 1 + step);
      auto loss = net->forward(input).pow(2).sum();
      at::Tensor rank0_before = norm->running_mean.clone();
      collectives.Broadcast(rank0_before, 0);
      if (rank == 1) {
        EXPECT_FALSE(torch::allclose(norm->running_mean, rank0_before)) << "the data did not differ";
      }
      loss.backward();
      for (const at::Tensor& buffer : net->buffers()) {
        at::Tensor rank0 = buffer.clone();
        collectives.Broadcast(rank0, 0);
        EXPECT_TRUE(torch::equal(buffer, rank0)) << "step " << step << " on rank " << rank;
      }
    }
    EXPECT_EQ(reducer.statistics().steps, 2U);
  });
}

TEST(Collectives, BroadcastAndBarrierReachEveryRank) {
  RunRanks(3, [](int rank, Collectives& collectives) {
    auto value = torch::full({3}, static_cast<float>(rank));
    collectives.Broadcast(value, 0);
    EXPECT_TRUE(torch::equal(value, torch::zeros({3})));
    collectives.Barrier();
    auto sum = torch::ones({1});
    collectives.AllReduceSum(sum);
    EXPECT_EQ(sum.item<float>(), 3.0F);
  });
}

}  // namespace
}  // namespace sray::train::internal
