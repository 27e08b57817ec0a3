// Job-wide checks of sray::train, run by the local (`sray run -N2`) and slurm
// (`srun -N2 --ray-cluster`) tests: a small model on synthetic data, so that
// each mode takes seconds. Prints "ok: <what>" lines, or "FAIL: ..." and
// exits 1.
//
//   train_check basic | kill-resume | kill-fail | exception | bad-input | dashboard
//               STORAGE_DIRECTORY

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include <sray/api.h>
#include <sray/train.h>

#include "check.h"

namespace {

using sray::check::Expect;
using sray::check::Fail;

struct CheckConfig {
  std::string mode;
  std::string storage;
  int epochs = 5;
  MSGPACK_DEFINE(mode, storage, epochs)
};

// A small classifier with a branch nobody uses: its parameters never get a
// gradient, which must not hang the group.
struct SmallNetImpl : torch::nn::Module {
  SmallNetImpl()
      : hidden(register_module("hidden", torch::nn::Linear(16, 32))),
        unused(register_module("unused", torch::nn::Linear(32, 32))),
        output(register_module("output", torch::nn::Linear(32, 2))) {}
  torch::Tensor forward(const torch::Tensor& input) { return output->forward(torch::relu(hidden->forward(input))); }
  torch::nn::Linear hidden, unused, output;
};
TORCH_MODULE(SmallNet);

// Points labelled by the side of a fixed plane they fall on: learnable.
std::pair<torch::Tensor, torch::Tensor> SyntheticData() {
  torch::manual_seed(7);
  auto inputs = torch::randn({2048, 16});
  auto plane = torch::linspace(-1, 1, 16);
  auto labels = (inputs.matmul(plane) > 0).to(torch::kInt64);
  return {inputs, labels};
}

bool Alive(std::int64_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto state_at = line.rfind(')') + 2;
  return state_at < line.size() && line[state_at] != 'Z';
}

void TrainLoop(const CheckConfig& config) {
  const auto& context = sray::train::GetContext();
  // The torchrun variables agree with the context.
  if (std::getenv("RANK") == nullptr || std::stoi(std::getenv("RANK")) != context.GetWorldRank() ||
      std::stoi(std::getenv("WORLD_SIZE")) != context.GetWorldSize() ||
      std::stoi(std::getenv("LOCAL_RANK")) != context.GetLocalRank() || std::getenv("MASTER_ADDR") == nullptr ||
      std::getenv("MASTER_PORT") == nullptr) {
    throw std::runtime_error("the torchrun variables do not match the context");
  }
  {
    std::ofstream pid_file(config.storage + "/pids", std::ios::app);
    pid_file << ::getpid() << "\n";
  }
  auto [inputs, labels] = SyntheticData();
  if (config.mode == "bad-input") {
    // Rank 1 builds a different model: PrepareModel must refuse, not
    // broadcast into mismatched tensors.
    torch::nn::Linear other(16, context.GetWorldRank() == 1 ? 3 : 2);
    sray::train::PrepareModel(other);
    return;
  }
  SmallNet network;
  int first_epoch = 0;
  double resumed_from = -1;
  if (auto checkpoint = sray::train::GetCheckpoint()) {
    torch::load(network, checkpoint->path() + "/model.pt");
    std::ifstream epoch_file(checkpoint->path() + "/epoch");
    int epoch = 0;
    epoch_file >> epoch;
    first_epoch = epoch + 1;
    resumed_from = epoch;
  }
  auto model = sray::train::PrepareModel(network);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05));
  sray::train::DistributedSampler sampler(static_cast<std::size_t>(inputs.size(0)));
  const std::string marker = config.storage + "/failed-once";
  for (int epoch = first_epoch; epoch < config.epochs; ++epoch) {
    sampler.set_epoch(static_cast<std::uint64_t>(epoch));
    double loss_sum = 0;
    int steps = 0;
    std::size_t position = 0;
    const auto& shard = sampler.indices();
    while (position < shard.size()) {
      const std::size_t end = std::min(shard.size(), position + 32);
      std::vector<std::int64_t> rows(shard.begin() + static_cast<std::ptrdiff_t>(position),
                                     shard.begin() + static_cast<std::ptrdiff_t>(end));
      position = end;
      const auto index = torch::tensor(rows);
      if (epoch == 2 && steps == 5 && context.GetWorldRank() == 1 && !std::filesystem::exists(marker)) {
        std::ofstream(marker) << "x";
        if (config.mode == "exception") throw std::runtime_error("injected failure in the training loop");
        if (config.mode == "kill-resume" || config.mode == "kill-fail") ::raise(SIGKILL);
      }
      optimizer.zero_grad();
      auto loss = torch::nn::functional::cross_entropy(model->forward(inputs.index_select(0, index)),
                                                       labels.index_select(0, index));
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>();
      ++steps;
    }
    sray::train::Metrics metrics{{"epoch", epoch}, {"loss", loss_sum / steps}, {"resumed_from", resumed_from},
                                 {"local_world_size", context.GetLocalWorldSize()}};
    // Every rank gives a part of the checkpoint: rank 0 the model, the
    // others a state file of their own, and an `epoch` file that clashes
    // with rank 0's (rank 0's is kept).
    const std::string directory = config.storage + "/scratch-" + std::to_string(::getpid());
    std::filesystem::create_directories(directory);
    if (context.GetWorldRank() == 0) {
      torch::save(model, directory + "/model.pt");
      std::ofstream(directory + "/epoch") << epoch;
    } else {
      std::ofstream(directory + "/epoch") << "rank " << context.GetWorldRank();
      std::ofstream(directory + "/rank" + std::to_string(context.GetWorldRank()) + "-state") << epoch;
    }
    sray::train::Report(metrics, sray::train::Checkpoint::FromDirectory(directory));
    std::filesystem::remove_all(directory);
  }
}
SRAY_REMOTE(TrainLoop);

// Every worker process of every attempt is gone soon after Fit returns.
void ExpectNoWorkerLeft(const std::string& storage) {
  std::ifstream pid_file(storage + "/pids");
  std::vector<std::int64_t> pids;
  for (std::int64_t pid = 0; pid_file >> pid;) pids.push_back(pid);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (std::int64_t pid : pids) {
    while (Alive(pid) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (Alive(pid)) Fail("training worker " + std::to_string(pid) + " still runs after Fit");
  }
  Expect(!pids.empty(), "no training worker is left (" + std::to_string(pids.size()) + " started)");
}

sray::train::Result Fit(const CheckConfig& config, int max_failures) {
  sray::train::ScalingConfig scaling;
  scaling.num_workers = 2;
  scaling.placement_strategy = sray::PlacementStrategy::kSpread;
  sray::train::RunConfig run;
  run.name = "check";
  run.storage_path = config.storage;
  run.failure_config.max_failures = max_failures;
  run.checkpoint_config.num_to_keep = 2;
  run.checkpoint_config.score_attribute = "loss";
  run.checkpoint_config.score_order = "min";
  sray::train::TorchConfig torch_config;
  torch_config.first_bucket_bytes = 256;  // several buckets even for this small model
  return sray::train::TorchTrainer(TrainLoop, config, scaling, run, torch_config).Fit();
}

std::size_t CountLines(const std::string& path) {
  std::ifstream file(path);
  std::size_t lines = 0;
  for (std::string line; std::getline(file, line);) ++lines;
  return lines;
}

std::size_t CountCheckpoints(const std::string& run_directory) {
  std::size_t count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(run_directory)) {
    if (entry.path().filename().string().rfind("checkpoint_", 0) == 0) ++count;
  }
  return count;
}

}  // namespace

int main(int argc, char** argv) {
  sray::Init(argc, argv);
  if (argc != 3) Fail("usage: train_check basic|kill-resume|kill-fail|exception|bad-input|dashboard "
                        "STORAGE_DIRECTORY");
  CheckConfig config{argv[1], argv[2], 5};
  std::filesystem::create_directories(config.storage);
  const std::string run_directory = config.storage + "/check";

  if (config.mode == "basic") {
    const auto result = Fit(config, 0);
    Expect(result.metrics_history.size() == 5, "five reports, one per epoch");
    Expect(result.metrics_history.back().at("loss") < 0.7 * result.metrics_history.front().at("loss"),
           "the loss falls (" + std::to_string(result.metrics_history.front().at("loss")) + " -> " +
               std::to_string(result.metrics_history.back().at("loss")) + ")");
    Expect(result.num_failures == 0, "no failure");
    Expect(result.checkpoint && std::filesystem::exists(result.checkpoint->path() + "/model.pt"),
           "the latest checkpoint is in storage");
    std::ifstream rank1_state(result.checkpoint->path() + "/rank1-state");
    std::ifstream epoch_file(result.checkpoint->path() + "/epoch");
    int rank1_epoch = -1;
    std::string stored_epoch;
    rank1_state >> rank1_epoch;
    epoch_file >> stored_epoch;
    Expect(rank1_epoch == 4, "rank 1's part of the last checkpoint is in it");
    Expect(stored_epoch == "4", "on a name clash rank 0's file is kept (epoch holds '" + stored_epoch + "')");
    Expect(CountCheckpoints(run_directory) == 2, "num_to_keep=2 keeps two checkpoints");
    Expect(CountLines(run_directory + "/metrics.jsonl") == 5, "metrics.jsonl has every report");
    Expect(result.metrics.at("local_world_size") == 1, "SPREAD puts one worker on each node");
    ExpectNoWorkerLeft(config.storage);
  } else if (config.mode == "kill-resume") {
    const auto result = Fit(config, 1);
    Expect(result.num_failures == 1, "one group restart after the kill");
    Expect(result.metrics.at("epoch") == 4, "training finished all epochs");
    Expect(result.metrics.at("resumed_from") == 1, "the restarted group resumed from epoch 1's checkpoint");
    Expect(result.metrics_history.size() == 5, "reports: epochs 0-1, then 2-4 after the restart");
    ExpectNoWorkerLeft(config.storage);
  } else if (config.mode == "kill-fail" || config.mode == "exception") {
    try {
      Fit(config, 0);
      Fail("Fit returned although a worker failed and max_failures is 0");
    } catch (const sray::train::TrainingFailedError& error) {
      std::cout << "error: " << error.what() << std::endl;
      Expect(error.world_rank() == 1, "the error names worker 1");
      if (config.mode == "kill-fail") {
        Expect(error.cause().find("died: its process ended with signal 9") != std::string::npos,
               "the cause says the worker's process was killed");
      } else {
        Expect(error.cause().find("injected failure in the training loop") != std::string::npos,
               "the cause is the loop's exception");
      }
      Expect(error.num_failures() == 0, "no restart was made");
    }
    ExpectNoWorkerLeft(config.storage);
  } else if (config.mode == "bad-input") {
    auto expect_refused = [](const char* what, auto&& fit, const std::string& says) {
      try {
        fit();
        Fail(std::string(what) + " was accepted");
      } catch (const sray::Error& error) {
        Expect(std::string(error.what()).find(says) != std::string::npos,
               std::string(what) + " is refused: " + error.what());
      }
    };
    auto scaling_of = [](int workers, std::map<std::string, double> resources = {}) {
      sray::train::ScalingConfig scaling;
      scaling.num_workers = workers;
      scaling.resources_per_worker = std::move(resources);
      scaling.placement_strategy = sray::PlacementStrategy::kSpread;
      return scaling;
    };
    auto fit_with = [&](sray::train::ScalingConfig scaling, sray::train::RunConfig run) {
      run.name = "bad";
      if (run.storage_path.empty()) run.storage_path = config.storage;
      return sray::train::TorchTrainer(TrainLoop, config, scaling, run).Fit();
    };
    expect_refused("num_workers=0", [&] { fit_with(scaling_of(0), {}); }, "num_workers is 0");
    sray::train::RunConfig bad_order;
    bad_order.checkpoint_config.score_order = "lowest";
    expect_refused("score_order=lowest", [&] { fit_with(scaling_of(2), bad_order); }, "score_order");
    expect_refused("1000 CPUs per worker", [&] {
      fit_with(scaling_of(2, {{"CPU", 1000}}), {});
    }, "CPU");
    sray::train::RunConfig unwritable;
    unwritable.storage_path = "/proc/sray-cannot-write-here";
    expect_refused("an unwritable storage_path", [&] { fit_with(scaling_of(2), unwritable); },
                   "cannot create the run directory");
    try {
      fit_with(scaling_of(2), {});
      Fail("workers with different models trained");
    } catch (const sray::train::TrainingFailedError& error) {
      Expect(error.cause().find("the workers' models differ") != std::string::npos,
             "PrepareModel refuses models that differ between workers");
    }
    ExpectNoWorkerLeft(config.storage);
  } else if (config.mode == "dashboard") {
    // A finished run stays on the dashboard until the test has looked:
    // until STORAGE_DIRECTORY/done exists (at most 120 s).
    const auto result = Fit(config, 0);
    Expect(result.metrics_history.size() == 5, "five reports, one per epoch");
    std::cout << "ready" << std::endl;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!std::filesystem::exists(config.storage + "/done") &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  } else {
    Fail("unknown mode " + config.mode);
  }
  return 0;
}
