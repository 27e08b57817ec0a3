#pragma once

// The training loop both examples share: the seed's SimpleCNN (two
// convolution+pooling stages, two linear layers, dropout 0.5) on
// Fashion-MNIST (28x28x1) or CIFAR-10 (32x32x3), data-parallel under
// sray::train: Adam, a DistributedSampler, evaluation on the test set and a
// checkpoint (model, optimizer, epoch) reported after every epoch, resumed
// from after a restart.

#include <cstdint>
#include <string>

#include <msgpack.hpp>

namespace sray::examples {

struct ImageTrainingConfig {
  std::string dataset;   // "fashion_mnist" or "cifar10"
  std::string data_dir;  // where the dataset's files are
  int epochs = 1;
  int batch_size = 64;   // per worker
  double learning_rate = 1e-3;
  std::int64_t train_limit = 0;  // use only the first N training samples (0: all)
  std::int64_t test_limit = 0;   // likewise for the test set
  std::uint64_t seed = 42;
  MSGPACK_DEFINE(dataset, data_dir, epochs, batch_size, learning_rate, train_limit, test_limit, seed)
};

// The loop, registered with SRAY_REMOTE (in image_training.cc).
void TrainImages(const ImageTrainingConfig& config);

}  // namespace sray::examples
