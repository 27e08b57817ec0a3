// Links sray::train from the installed package, as a user's training program
// would: a loop taking a std::map<std::string, double> config, both forms of
// PrepareModel (a ModuleHolder and a std::shared_ptr), and a TorchTrainer.
// Outside a training worker GetContext says so with sray::Error.
#include <iostream>
#include <map>
#include <memory>
#include <string>

#include <torch/nn/modules/linear.h>

#include <sray/api.h>
#include <sray/train.h>

namespace {

void TrainLoop(const std::map<std::string, double>& config) {
  torch::nn::Linear holder(4, static_cast<std::int64_t>(config.at("outputs")));
  holder = sray::train::PrepareModel(holder);
  auto pointer = std::make_shared<torch::nn::LinearImpl>(4, 2);
  pointer = sray::train::PrepareModel(pointer);
  sray::train::Report({{"outputs", config.at("outputs")}});
}
SRAY_REMOTE(TrainLoop);

}  // namespace

int main(int argc, char** argv) {
  sray::train::ScalingConfig scaling;
  scaling.num_workers = 2;
  if (argc > 1 && std::string(argv[1]) == "fit") {
    // Compiled here; run by a job (`sray run -N2 train_consumer fit`).
    sray::Init(argc, argv);
    const auto result =
        sray::train::TorchTrainer(TrainLoop, std::map<std::string, double>{{"outputs", 2}}, scaling,
                                  sray::train::RunConfig{})
            .Fit();
    std::cout << "reports " << result.metrics_history.size() << "\n";
    return 0;
  }
  try {
    sray::train::GetContext();
  } catch (const sray::Error& error) {
    std::cout << error.what() << "\n";
    return scaling.num_workers == 2 ? 0 : 1;
  }
  return 1;
}
