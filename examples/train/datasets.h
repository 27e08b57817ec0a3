#pragma once

// Readers for the two image formats the training examples use, free of
// LibTorch: IDX (MNIST and Fashion-MNIST; gzip-compressed or plain, read
// through zlib) and CIFAR-10's binary batches (data_batch_N.bin). Each
// refuses a malformed file with a message naming the file and the problem.

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace sray::examples {

class DatasetError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ImageSet {
  std::size_t count = 0;
  std::size_t channels = 1;
  std::size_t height = 0;
  std::size_t width = 0;
  std::vector<std::uint8_t> pixels;  // count x channels x height x width
  std::vector<std::uint8_t> labels;  // count
};

// An IDX image file (magic 0x00000803) and its label file (0x00000801).
ImageSet ReadIdx(const std::string& images_path, const std::string& labels_path);
// CIFAR-10 binary batches: records of one label byte and 3x32x32 pixels.
ImageSet ReadCifar10(const std::vector<std::string>& batch_paths);
// The decompressed bytes of a gzip (or plain) file.
std::vector<std::uint8_t> ReadMaybeCompressed(const std::string& path);

}  // namespace sray::examples
