// Job-wide checks of sray::train, run by the local (`sray run -N2`) and slurm
// (`srun -N2 --ray-cluster`) tests: a small model on synthetic data, so that
// each mode takes seconds. Prints "ok: <what>" lines, or "FAIL: ..." and
// exits 1.
//
//   train_check basic | kill-resume | kill-fail | kill-twice | exception | bad-input | own-group |
//               dashboard
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
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
// Debian's LibTorch has Gloo's headers, a pip wheel's none: there the
// program's own group is checked through its store alone.
#if __has_include(<gloo/algorithm.h>)
#define TRAIN_CHECK_WITH_GLOO 1
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif

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

// A hash of every parameter's bytes: equal on every worker after
// PrepareModel's broadcast, different before it (each rank seeds its own).
std::string Fingerprint(torch::nn::Module& module) {
  std::uint64_t hash = 1469598103934665603ULL;
  for (const auto& parameter : module.parameters()) {
    const auto bytes = parameter.detach().contiguous().to(torch::kCPU);
    const auto* data = static_cast<const unsigned char*>(bytes.data_ptr());
    for (std::size_t index = 0; index < bytes.nbytes(); ++index)
      hash = (hash ^ data[index]) * 1099511628211ULL;
  }
  return std::to_string(hash);
}

// Scores of the epochs' checkpoints, not in the order of the epochs, so that
// pruning by score keeps other checkpoints than pruning by age would.
constexpr double kScores[] = {3, 1, 4, 2, 5, 6, 7, 8};

template <typename Model>
void TrainModel(Model network, const CheckConfig& config, const torch::Tensor& inputs,
                const torch::Tensor& labels) {
  const auto& context = sray::train::GetContext();
  const std::string rank = std::to_string(context.GetWorldRank());
  int first_epoch = 0;
  double resumed_from = -1;
  const auto checkpoint = sray::train::GetCheckpoint();
  if (!checkpoint) {
    std::ofstream(config.storage + "/weights-before-rank" + rank) << Fingerprint(*network);
  } else {
    torch::load(network, checkpoint->path() + "/model.pt");
    std::ifstream epoch_file(checkpoint->path() + "/epoch");
    int epoch = 0;
    epoch_file >> epoch;
    first_epoch = epoch + 1;
    resumed_from = epoch;
  }
  network = sray::train::PrepareModel(network);
  if (!checkpoint)
    std::ofstream(config.storage + "/weights-after-rank" + rank) << Fingerprint(*network);
  auto& model = network;
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
      if (config.mode == "kill-twice" && epoch == 3 && steps == 0 && context.GetWorldRank() == 0 &&
          std::filesystem::exists(marker)) {
        throw std::runtime_error("injected second failure, in the restarted group");
      }
      if (epoch == 2 && steps == 5 && context.GetWorldRank() == 1 && !std::filesystem::exists(marker)) {
        std::ofstream(marker) << "x";
        if (config.mode == "exception") throw std::runtime_error("injected failure in the training loop");
        if (config.mode == "kill-resume" || config.mode == "kill-fail" ||
            config.mode == "kill-twice")
          ::raise(SIGKILL);
      }
      optimizer.zero_grad();
      torch::Tensor loss = torch::nn::functional::cross_entropy(
          model->forward(inputs.index_select(0, index)), labels.index_select(0, index));
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>();
      ++steps;
    }
    sray::train::Metrics metrics{{"epoch", epoch},
                                 {"loss", loss_sum / steps},
                                 {"resumed_from", resumed_from},
                                 {"local_world_size", context.GetLocalWorldSize()},
                                 {"world_rank", context.GetWorldRank()},
                                 {"score", kScores[epoch]}};
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
      if (config.mode == "bad-part" && epoch == 1) {
        // A part the worker cannot send: its Report throws after rank 0's.
        std::filesystem::create_symlink("/etc/hostname", directory + "/linked");
      }
    }
    sray::train::Report(metrics, sray::train::Checkpoint::FromDirectory(directory));
    std::filesystem::remove_all(directory);
  }
}

// What code written for torchrun does with the variables: a TCPStore of its
// own on MASTER_ADDR:MASTER_PORT (rank 0 serves it), and a Gloo group of its
// own over that store. Rank 0 reports what every rank saw.
void OwnStoreAndGroup() {
  const auto& context = sray::train::GetContext();
  const int rank = context.GetWorldRank();
  const int world_size = context.GetWorldSize();
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(std::stoi(std::getenv("MASTER_PORT")));
  options.isServer = rank == 0;
  options.numWorkers = static_cast<std::size_t>(world_size);
  options.timeout = std::chrono::seconds(60);
  auto store = c10::make_intrusive<c10d::TCPStore>(std::getenv("MASTER_ADDR"), options);
  const std::string mine = "pid " + std::to_string(::getpid());
  store->set("rank" + std::to_string(rank), std::vector<std::uint8_t>(mine.begin(), mine.end()));
  double peers_seen = 0;
  for (int other = 0; other < world_size; ++other) {
    const auto value = store->get("rank" + std::to_string(other));  // waits for it
    if (std::string(value.begin(), value.end()).rfind("pid ", 0) == 0) ++peers_seen;
  }
  double sum = static_cast<double>(store->add("sum", rank + 1));
#ifdef TRAIN_CHECK_WITH_GLOO
  auto gloo_options = c10d::ProcessGroupGloo::Options::create();
  if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME");
      interface != nullptr && *interface) {
    gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(interface));
  } else {
    gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, gloo_options);
  std::vector<at::Tensor> tensors{torch::full({4}, static_cast<double>(rank + 1), torch::kDouble)};
  group->allreduce(tensors)->wait();
  sum = tensors[0][3].item<double>();
#else
  // Every rank's add is in once the counter stops short of none.
  for (int waited = 0; sum < world_size * (world_size + 1) / 2.0 && waited < 600; ++waited) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    sum = static_cast<double>(store->add("sum", 0));
  }
#endif
  // Every rank is past its reads before any goes on; Report, a barrier,
  // then keeps rank 0's server up until every rank's last call to it.
  store->add("done", 1);
  for (int waited = 0; store->add("done", 0) < world_size && waited < 600; ++waited)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  sray::train::Report({{"peers_seen", peers_seen}, {"sum", sum}, {"world_size", world_size}});
}

void TrainLoop(const CheckConfig& config) {
  const auto& context = sray::train::GetContext();
  // The torchrun variables agree with the context.
  auto number = [](const char* name) {
    const char* value = std::getenv(name);
    if (value == nullptr)
      throw std::runtime_error(std::string("the torchrun variable ") + name + " is not set");
    return std::stoi(value);
  };
  if (number("RANK") != context.GetWorldRank() || number("WORLD_SIZE") != context.GetWorldSize() ||
      number("LOCAL_RANK") != context.GetLocalRank() ||
      number("LOCAL_WORLD_SIZE") != context.GetLocalWorldSize() ||
      number("GROUP_RANK") != context.GetNodeRank() || std::getenv("MASTER_ADDR") == nullptr ||
      number("MASTER_PORT") <= 0) {
    throw std::runtime_error("the torchrun variables do not match the context");
  }
  {
    std::ofstream pid_file(config.storage + "/pids", std::ios::app);
    pid_file << ::getpid() << "\n";
  }
  if (config.mode == "own-group") {
    OwnStoreAndGroup();
    return;
  }
  auto [inputs, labels] = SyntheticData();
  if (config.mode == "bad-input") {
    // Rank 1 builds a different model: PrepareModel must refuse, not
    // broadcast into mismatched tensors.
    torch::nn::Linear other(16, context.GetWorldRank() == 1 ? 3 : 2);
    sray::train::PrepareModel(other);
    return;
  }
  // Each rank starts from weights of its own: PrepareModel must make them
  // rank 0's. kill-resume holds its model as a std::shared_ptr, the other
  // modes as a ModuleHolder: PrepareModel takes both.
  torch::manual_seed(static_cast<std::uint64_t>(100 + context.GetWorldRank()));
  if (config.mode == "kill-resume") {
    TrainModel(std::make_shared<SmallNetImpl>(), config, inputs, labels);
  } else {
    TrainModel(SmallNet(), config, inputs, labels);
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

// After Fit, the run directory holds its checkpoints and its log only: no
// staged part, partial checkpoint or storage marker.
void ExpectOnlyCheckpointsAndLog(const std::string& run_directory) {
  std::string others;
  for (const auto& entry : std::filesystem::directory_iterator(run_directory)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("checkpoint_", 0) != 0 && name != "metrics.jsonl") others += " " + name;
  }
  Expect(others.empty(), "only checkpoints and the log are left in the run directory" +
                             (others.empty() ? std::string() : ", not" + others));
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
  run.checkpoint_config.score_attribute = "score";
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

std::set<std::string> CheckpointNames(const std::string& run_directory) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(run_directory)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("checkpoint_", 0) == 0) names.insert(name);
  }
  return names;
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::string text;
  std::getline(file, text);
  if (text.empty()) Fail("nothing in " + path);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  sray::Init(argc, argv);
  if (argc != 3)
    Fail(
        "usage: train_check "
        "basic|kill-resume|kill-fail|kill-twice|exception|bad-part|bad-input|own-group|dashboard "
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
    // Scores 3, 1, 4, 2, 5 (lower is better): the best two stay, and the
    // latest, from which a restart would resume.
    Expect(CheckpointNames(run_directory) ==
               std::set<std::string>{"checkpoint_000001", "checkpoint_000003", "checkpoint_000004"},
           "num_to_keep=2 by score keeps the two best checkpoints and the latest");
    std::vector<std::string> best;
    for (const auto& [checkpoint, metrics] : result.best_checkpoints) {
      best.push_back(std::filesystem::path(checkpoint.path()).filename().string() + "=" +
                     std::to_string(static_cast<int>(metrics.at("score"))));
    }
    Expect(best == std::vector<std::string>{"checkpoint_000001=1", "checkpoint_000003=2",
                                            "checkpoint_000004=5"},
           "best_checkpoints lists the kept ones best first, with their metrics");
    bool only_rank0 = true;
    for (const auto& metrics : result.metrics_history)
      only_rank0 = only_rank0 && metrics.at("world_rank") == 0;
    Expect(only_rank0, "only rank 0's metrics are kept");
    const std::string rank0_before = ReadFile(config.storage + "/weights-before-rank0");
    Expect(ReadFile(config.storage + "/weights-before-rank1") != rank0_before,
           "the workers built different weights (each seeded its own)");
    Expect(ReadFile(config.storage + "/weights-after-rank0") == rank0_before &&
               ReadFile(config.storage + "/weights-after-rank1") == rank0_before,
           "PrepareModel gave every worker rank 0's weights");
    Expect(CountLines(run_directory + "/metrics.jsonl") == 5, "metrics.jsonl has every report");
    Expect(result.metrics.at("local_world_size") == 1, "SPREAD puts one worker on each node");
    ExpectNoWorkerLeft(config.storage);
    ExpectOnlyCheckpointsAndLog(run_directory);
  } else if (config.mode == "kill-resume") {
    const auto result = Fit(config, 1);
    Expect(result.num_failures == 1, "one group restart after the kill");
    Expect(result.metrics.at("epoch") == 4, "training finished all epochs");
    Expect(result.metrics.at("resumed_from") == 1, "the restarted group resumed from epoch 1's checkpoint");
    Expect(result.metrics_history.size() == 5, "reports: epochs 0-1, then 2-4 after the restart");
    ExpectNoWorkerLeft(config.storage);
    ExpectOnlyCheckpointsAndLog(run_directory);
  } else if (config.mode == "kill-twice") {
    try {
      Fit(config, 1);
      Fail("Fit returned although the restarted group failed too and max_failures is 1");
    } catch (const sray::train::TrainingFailedError& error) {
      const std::string what = error.what();
      std::cout << "error: " << what << std::endl;
      Expect(error.world_rank() == 1 && error.cause().find("signal 9") != std::string::npos,
             "the error names the first failure: worker 1, killed");
      Expect(error.num_failures() == 1, "one restart was made");
      Expect(what.find("the last failure was worker 0") != std::string::npos &&
                 what.find("injected second failure") != std::string::npos,
             "the message names the last failure too");
      Expect(what.find("max_failures (1) is used up") != std::string::npos,
             "the message says max_failures is used up");
    }
    ExpectNoWorkerLeft(config.storage);
  } else if (config.mode == "bad-part") {
    // Before: rank 0's report reached the driver first, the driver's request
    // for rank 1's part found its loop ended, and the generic "ended its
    // loop without the checkpoint part" hid rank 1's own error.
    try {
      Fit(config, 0);
      Fail("Fit returned although a worker's checkpoint part could not be sent");
    } catch (const sray::train::TrainingFailedError& error) {
      std::cout << "error: " << error.what() << std::endl;
      Expect(error.world_rank() == 1, "the error names worker 1");
      Expect(error.cause().find("not a regular file") != std::string::npos,
             "the cause is the worker's own error about its checkpoint part");
    }
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
  } else if (config.mode == "own-group") {
    const auto result = Fit(config, 0);
    Expect(result.metrics.at("world_size") == 2 && result.metrics.at("peers_seen") == 2,
           "the loop's own TCPStore on MASTER_ADDR:MASTER_PORT reached every rank");
#ifdef TRAIN_CHECK_WITH_GLOO
    const std::string group = "its own Gloo group over that store";
#else
    const std::string group = "a sum through that store";
#endif
    Expect(result.metrics.at("sum") == 3, group + " adds every rank's value (" +
                                              std::to_string(result.metrics.at("sum")) +
                                              ", 3 expected)");
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
