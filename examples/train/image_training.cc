#include "image_training.h"

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <vector>

#include <torch/torch.h>

#include <sray/api.h>
#include <sray/train.h>

#include "datasets.h"

namespace sray::examples {
namespace {

// The seed's SimpleCNN, for any square input: side -> side/4 after two pools.
struct SimpleCnnImpl : torch::nn::Module {
  SimpleCnnImpl(std::int64_t channels, std::int64_t side)
      : conv1(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(channels, 32, 3).padding(1)))),
        conv2(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)))),
        fc1(register_module("fc1", torch::nn::Linear(64 * (side / 4) * (side / 4), 128))),
        fc2(register_module("fc2", torch::nn::Linear(128, 10))),
        dropout(register_module("dropout", torch::nn::Dropout(0.5))) {}

  torch::Tensor forward(torch::Tensor input) {
    auto x = torch::max_pool2d(torch::relu(conv1->forward(input)), 2);
    x = torch::max_pool2d(torch::relu(conv2->forward(x)), 2);
    x = torch::relu(fc1->forward(x.flatten(1)));
    return fc2->forward(dropout->forward(x));
  }

  torch::nn::Conv2d conv1;
  torch::nn::Conv2d conv2;
  torch::nn::Linear fc1;
  torch::nn::Linear fc2;
  torch::nn::Dropout dropout;
};
TORCH_MODULE(SimpleCnn);

// Images as normalised float tensors in memory, served a batch at a time.
class InMemoryImages : public torch::data::datasets::BatchDataset<InMemoryImages, torch::data::Example<>> {
 public:
  InMemoryImages(torch::Tensor images, torch::Tensor labels)
      : images_(std::move(images)), labels_(std::move(labels)) {}
  torch::data::Example<> get_batch(c10::ArrayRef<std::size_t> indices) override {
    std::vector<std::int64_t> rows(indices.begin(), indices.end());
    const auto index = torch::tensor(rows, torch::kInt64);
    return {images_.index_select(0, index), labels_.index_select(0, index)};
  }
  c10::optional<std::size_t> size() const override { return static_cast<std::size_t>(images_.size(0)); }
  const torch::Tensor& images() const { return images_; }
  const torch::Tensor& labels() const { return labels_; }

 private:
  torch::Tensor images_;
  torch::Tensor labels_;
};

// Normalised with the training set's per-channel mean and deviation
// (computed here when `statistics` is empty, and returned through it).
InMemoryImages ToTensors(const ImageSet& set, std::int64_t limit, std::vector<torch::Tensor>& statistics) {
  auto count = static_cast<std::int64_t>(set.count);
  if (limit > 0 && limit < count) count = limit;
  const auto channels = static_cast<std::int64_t>(set.channels);
  const auto height = static_cast<std::int64_t>(set.height);
  const auto width = static_cast<std::int64_t>(set.width);
  auto pixels = torch::from_blob(const_cast<std::uint8_t*>(set.pixels.data()),  // NOLINT: read only
                                 {count, channels, height, width}, torch::kUInt8)
                    .to(torch::kFloat32)
                    .div_(255.0);
  if (statistics.empty()) statistics = {pixels.mean({0, 2, 3}, true), pixels.std({0, 2, 3}, true, true)};
  pixels = (pixels - statistics[0]) / statistics[1];
  auto labels = torch::from_blob(const_cast<std::uint8_t*>(set.labels.data()), {count}, torch::kUInt8)  // NOLINT
                    .to(torch::kInt64);
  return {pixels, labels};
}

struct Data {
  InMemoryImages train;
  InMemoryImages test;
  std::int64_t channels;
  std::int64_t side;
};

Data Load(const ImageTrainingConfig& config) {
  const std::string& directory = config.data_dir;
  if (config.dataset == "fashion_mnist") {
    const ImageSet train = ReadIdx(directory + "/train-images-idx3-ubyte.gz", directory + "/train-labels-idx1-ubyte.gz");
    const ImageSet test = ReadIdx(directory + "/t10k-images-idx3-ubyte.gz", directory + "/t10k-labels-idx1-ubyte.gz");
    std::vector<torch::Tensor> statistics;
    auto train_tensors = ToTensors(train, config.train_limit, statistics);
    return {std::move(train_tensors), ToTensors(test, config.test_limit, statistics), 1, 28};
  }
  if (config.dataset == "cifar10") {
    std::vector<std::string> batches;
    for (int index = 1; index <= 5; ++index) {
      const std::string path = directory + "/data_batch_" + std::to_string(index) + ".bin";
      if (std::filesystem::exists(path)) batches.push_back(path);
    }
    if (batches.empty()) throw DatasetError("no data_batch_N.bin in " + directory + ": point --data at CIFAR-10's binary version");
    const ImageSet train = ReadCifar10(batches);
    const std::string test_path = directory + "/test_batch.bin";
    const ImageSet test = std::filesystem::exists(test_path) ? ReadCifar10({test_path}) : train;
    std::vector<torch::Tensor> statistics;
    auto train_tensors = ToTensors(train, config.train_limit, statistics);
    return {std::move(train_tensors), ToTensors(test, config.test_limit, statistics), 3, 32};
  }
  throw DatasetError("unknown dataset '" + config.dataset + "': use fashion_mnist or cifar10");
}

double Accuracy(SimpleCnn& model, const InMemoryImages& test, const torch::Device& device) {
  torch::NoGradGuard no_grad;
  model->eval();
  std::int64_t correct = 0;
  const std::int64_t total = test.images().size(0);
  for (std::int64_t start = 0; start < total; start += 1000) {
    const std::int64_t length = std::min<std::int64_t>(1000, total - start);
    auto output = model->forward(test.images().narrow(0, start, length).to(device));
    correct += output.argmax(1).eq(test.labels().narrow(0, start, length).to(device)).sum().item<std::int64_t>();
  }
  model->train();
  return static_cast<double>(correct) / static_cast<double>(total);
}

}  // namespace

void TrainImages(const ImageTrainingConfig& config) {
  const auto& context = sray::train::GetContext();
  const torch::Device device = context.GetDevice();
  torch::manual_seed(config.seed);
  Data data = Load(config);
  // A checkpoint is loaded before PrepareModel, which then copies rank 0's
  // parameters to every worker.
  SimpleCnn network(data.channels, data.side);
  int first_epoch = 0;
  const auto checkpoint = sray::train::GetCheckpoint();
  if (checkpoint) {
    torch::load(network, checkpoint->path() + "/model.pt");
    torch::Tensor epoch;
    torch::load(epoch, checkpoint->path() + "/epoch.pt");
    first_epoch = static_cast<int>(epoch.item<std::int64_t>()) + 1;
  }
  auto model = sray::train::PrepareModel(network);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(config.learning_rate));
  if (checkpoint) torch::load(optimizer, checkpoint->path() + "/optimizer.pt");

  sray::train::DistributedSampler sampler(data.train.size().value());
  auto loader = torch::data::make_data_loader(data.train, sampler,
                                              torch::data::DataLoaderOptions(static_cast<std::size_t>(config.batch_size)));
  for (int epoch = first_epoch; epoch < config.epochs; ++epoch) {
    sampler.set_epoch(static_cast<std::uint64_t>(epoch));
    // Summed on the device and read once per epoch: a read per step would
    // wait for every step's kernels on a GPU.
    auto loss_sum = torch::zeros({}, torch::TensorOptions().dtype(torch::kFloat32).device(device));
    std::int64_t batches = 0;
    const auto started = std::chrono::steady_clock::now();
    for (auto& batch : *loader) {
      optimizer.zero_grad();
      auto loss = torch::nn::functional::cross_entropy(model->forward(batch.data.to(device)), batch.target.to(device));
      loss.backward();
      optimizer.step();
      loss_sum += loss.detach();
      ++batches;
    }
    // Reading the sum waits for the epoch's last kernels, so that the time counts them.
    const double loss_total = loss_sum.item<double>();
    const double train_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const double samples = static_cast<double>(sampler.indices().size()) * context.GetWorldSize();
    sray::train::Metrics metrics{
        {"epoch", epoch},
        {"loss", batches > 0 ? loss_total / static_cast<double>(batches) : 0.0},
        {"test_accuracy", Accuracy(model, data.test, device)},
        {"train_seconds", train_seconds},
        {"train_samples_per_second", samples / train_seconds}};
    if (context.GetWorldRank() == 0) {
      const std::string directory = std::filesystem::temp_directory_path().string() + "/sray-checkpoint-" +
                                    std::to_string(::getpid());
      // Report copies the checkpoint; the scratch copy goes however Report
      // ends (it throws when another worker failed).
      struct RemovedAtScopeEnd {
        std::string path;
        ~RemovedAtScopeEnd() {
          std::error_code ignored;
          std::filesystem::remove_all(path, ignored);
        }
      } scratch{directory};
      std::filesystem::create_directories(directory);
      torch::save(model, directory + "/model.pt");
      torch::save(optimizer, directory + "/optimizer.pt");
      torch::save(torch::tensor(static_cast<std::int64_t>(epoch)), directory + "/epoch.pt");
      sray::train::Report(metrics, sray::train::Checkpoint::FromDirectory(directory));
    } else {
      sray::train::Report(metrics);
    }
  }
}

}  // namespace sray::examples

SRAY_REMOTE(sray::examples::TrainImages);
