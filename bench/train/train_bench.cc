// sray's side of bench/train/run: the Fashion-MNIST example's loop (the
// seed's SimpleCNN, Adam, batch 64 per worker, one intra-op thread per
// worker), then the gradient all-reduce timed through the reducer and raw.
// Prints one JSON line "result {...}" for the run script.
//
//   sray run -N2 build/bench/train_bench --workers 2 --epochs 3
//   sray run -N1 --ray-cluster=config=FILE build/bench/train_bench --workers 1 --use-gpu
//       (FILE says resources = "GPU:1")

#include <cstdio>
#include <iostream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <sray/api.h>
#include <sray/train.h>

#include "../../examples/train/image_training.h"
#include "train/allreduce_probe.h"

namespace {

struct BenchConfig {
  sray::examples::ImageTrainingConfig training;
  int allreduce_steps = 50;
  MSGPACK_DEFINE(training, allreduce_steps)
};

void BenchLoop(const BenchConfig& config) {
  sray::examples::TrainImages(config.training);
  const auto timing = sray::train::internal::MeasureAllReduce(config.allreduce_steps);
  sray::train::Report({{"allreduce_seconds_per_step", timing.reducer_seconds_per_step},
                       {"raw_allreduce_seconds_per_step", timing.raw_seconds_per_step},
                       {"overlapped_allreduce_seconds_per_step", timing.overlapped_seconds_per_step},
                       {"buckets", static_cast<double>(timing.bucket_bytes.size())}});
}
SRAY_REMOTE(BenchLoop);

}  // namespace

int main(int argc, char** argv) {
  sray::Init(argc, argv);
  BenchConfig config;
  config.training.dataset = "fashion_mnist";
  config.training.data_dir = "/usr/share/datasets/fashion-mnist";
  int workers = 2;
  bool use_gpu = false;
  CLI::App app("sray's side of the training benchmark");
  app.add_option("--workers", workers)->check(CLI::PositiveNumber);
  app.add_option("--epochs", config.training.epochs)->check(CLI::PositiveNumber);
  app.add_option("--train-limit", config.training.train_limit);
  app.add_option("--allreduce-steps", config.allreduce_steps)->check(CLI::PositiveNumber);
  app.add_option("--data", config.training.data_dir, "the Fashion-MNIST files' directory")
      ->check(CLI::ExistingDirectory);
  app.add_flag("--use-gpu", use_gpu, "one GPU per worker, NCCL");
  CLI11_PARSE(app, argc, argv);

  sray::train::ScalingConfig scaling;
  scaling.num_workers = workers;
  scaling.resources_per_worker = {{"CPU", 1}};
  scaling.use_gpu = use_gpu;
  scaling.placement_strategy = sray::PlacementStrategy::kSpread;
  sray::train::RunConfig run;
  run.name = "train_bench";
  const auto result = sray::train::TorchTrainer(BenchLoop, config, scaling, run).Fit();

  double samples = 0;
  double seconds = 0;
  double accuracy = 0;
  for (const auto& report : result.metrics_history) {
    if (!report.contains("train_seconds")) continue;
    seconds += report.at("train_seconds");
    samples += report.at("train_seconds") * report.at("train_samples_per_second");
    accuracy = report.at("test_accuracy");
  }
  nlohmann::json line{
      {"workers", workers},
      {"device", use_gpu ? "cuda" : "cpu"},
      {"epochs", config.training.epochs},
      {"samples_per_second", samples / seconds},
      {"test_accuracy", accuracy},
      {"allreduce_seconds_per_step", result.metrics.at("allreduce_seconds_per_step")},
      {"raw_allreduce_seconds_per_step", result.metrics.at("raw_allreduce_seconds_per_step")},
      {"overlapped_allreduce_seconds_per_step",
       result.metrics.at("overlapped_allreduce_seconds_per_step")},
      {"buckets", result.metrics.at("buckets")}};
  std::cout << "result " << line.dump() << std::endl;
  return 0;
}
