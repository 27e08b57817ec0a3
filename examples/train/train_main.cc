#include "train_main.h"

#include <cstdio>
#include <iostream>

#include <CLI/CLI.hpp>

#include <sray/api.h>
#include <sray/train.h>

#include "image_training.h"

namespace sray::examples {

int RunImageTrainingMain(int argc, char** argv, const std::string& dataset, const std::string& default_data_dir) {
  sray::Init(argc, argv);  // workers never return from here

  ImageTrainingConfig config;
  config.dataset = dataset;
  config.data_dir = default_data_dir;
  sray::train::ScalingConfig scaling;
  scaling.num_workers = 2;
  sray::train::RunConfig run;
  run.name = "train_" + dataset;
  bool resume = false;
  int cpus_per_worker = 1;

  CLI::App app("Data-parallel training of the seed's SimpleCNN on " + dataset + " with sray::train");
  app.add_option("--workers", scaling.num_workers, "training workers")->check(CLI::PositiveNumber);
  app.add_option("--cpus-per-worker", cpus_per_worker, "CPUs each worker holds (its intra-op threads)")
      ->check(CLI::PositiveNumber);
  app.add_option("--epochs", config.epochs, "epochs")->check(CLI::PositiveNumber);
  app.add_option("--batch-size", config.batch_size, "batch size per worker")->check(CLI::PositiveNumber);
  app.add_option("--learning-rate", config.learning_rate, "Adam's learning rate");
  app.add_flag("--use-gpu", scaling.use_gpu, "one GPU per worker, NCCL");
  app.add_option("--spread", [&](const CLI::results_t&) {
    scaling.placement_strategy = sray::PlacementStrategy::kSpread;
    return true;
  }, "one worker per node where possible")->expected(0);
  app.add_option("--max-failures", run.failure_config.max_failures, "group restarts allowed (-1: unlimited)");
  app.add_option("--storage-path", run.storage_path, "where checkpoints and metrics.jsonl go (default: the session directory)");
  app.add_option("--name", run.name, "the run's name (its directory under the storage path)");
  app.add_option("--num-to-keep", run.checkpoint_config.num_to_keep, "checkpoints kept (0: all)");
  app.add_flag("--resume", resume, "continue from the latest checkpoint in the run's directory");
  app.add_option("--data", config.data_dir, "the dataset's directory");
  app.add_option("--train-limit", config.train_limit, "use only the first N training samples");
  app.add_option("--test-limit", config.test_limit, "use only the first N test samples");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  // The default storage goes with the job: there is nothing to resume from.
  if (resume && run.storage_path.empty()) {
    std::fprintf(
        stderr,
        "sray: --resume needs --storage-path: without it checkpoints go to the job's session "
        "directory, which is removed when the job ends; give the same --storage-path as the "
        "run to continue\n");
    return 2;
  }
  scaling.resources_per_worker = {{"CPU", cpus_per_worker}};
  run.checkpoint_config.score_attribute = "test_accuracy";

  try {
    sray::train::TorchTrainer trainer(TrainImages, config, scaling, run);
    if (resume && !run.storage_path.empty()) {
      trainer.SetResumeFromCheckpoint(sray::train::LatestCheckpoint(run.storage_path + "/" + run.name));
    }
    const sray::train::Result result = trainer.Fit();
    std::printf("final test accuracy %.4f after %zu reports, %d restart(s); checkpoint %s\n",
                result.metrics.count("test_accuracy") ? result.metrics.at("test_accuracy") : 0.0,
                result.metrics_history.size(), result.num_failures,
                result.checkpoint ? result.checkpoint->path().c_str() : "none");
    return 0;
  } catch (const sray::Error& error) {
    std::cerr << error.what() << std::endl;
    return 1;
  }
}

}  // namespace sray::examples
