#pragma once

// The command line both training examples share:
//   --workers N --epochs E --use-gpu --max-failures F --storage-path P --name N
//   --resume --data DIR --train-limit N --test-limit N --batch-size B
// Runs TorchTrainer::Fit on the driver and prints the result; exits 1 with
// an `sray:` line when training failed.

#include <string>

namespace sray::examples {

int RunImageTrainingMain(int argc, char** argv, const std::string& dataset, const std::string& default_data_dir);

}  // namespace sray::examples
