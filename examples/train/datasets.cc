#include "datasets.h"

#include <zlib.h>

#include <memory>

namespace sray::examples {
namespace {

std::uint32_t BigEndian32(const std::vector<std::uint8_t>& bytes, std::size_t offset) {
  return (std::uint32_t{bytes[offset]} << 24U) | (std::uint32_t{bytes[offset + 1]} << 16U) |
         (std::uint32_t{bytes[offset + 2]} << 8U) | std::uint32_t{bytes[offset + 3]};
}

}  // namespace

std::vector<std::uint8_t> ReadMaybeCompressed(const std::string& path) {
  // gzread reads plain files as they are, so both forms work.
  std::unique_ptr<gzFile_s, int (*)(gzFile)> file(gzopen(path.c_str(), "rb"), gzclose);
  if (!file) throw DatasetError("cannot open " + path + ": check the path (Fashion-MNIST: apt install dataset-fashion-mnist)");
  std::vector<std::uint8_t> bytes;
  std::vector<std::uint8_t> chunk(1U << 20U);
  while (true) {
    const int got = gzread(file.get(), chunk.data(), static_cast<unsigned>(chunk.size()));
    if (got < 0) {
      int code = 0;
      throw DatasetError("cannot read " + path + ": " + gzerror(file.get(), &code) + " (damaged or truncated?)");
    }
    if (got == 0) {
      // A gzip stream cut short reads as an early end; only gzerror tells.
      int code = Z_OK;
      const char* message = gzerror(file.get(), &code);
      if (code == Z_BUF_ERROR) {
        throw DatasetError("cannot read " + path + ": " + message +
                           ": the file is truncated; download or install it again");
      }
      break;
    }
    bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + got);
  }
  return bytes;
}

ImageSet ReadIdx(const std::string& images_path, const std::string& labels_path) {
  const std::vector<std::uint8_t> images = ReadMaybeCompressed(images_path);
  const std::vector<std::uint8_t> labels = ReadMaybeCompressed(labels_path);
  if (images.size() < 16 || BigEndian32(images, 0) != 0x00000803U) {
    throw DatasetError(images_path + " is not an IDX image file (magic 0x00000803 and a 16-byte header expected)");
  }
  if (labels.size() < 8 || BigEndian32(labels, 0) != 0x00000801U) {
    throw DatasetError(labels_path + " is not an IDX label file (magic 0x00000801 and an 8-byte header expected)");
  }
  ImageSet set;
  set.count = BigEndian32(images, 4);
  set.height = BigEndian32(images, 8);
  set.width = BigEndian32(images, 12);
  const std::size_t pixels = set.count * set.height * set.width;
  if (images.size() != 16 + pixels) {
    throw DatasetError(images_path + " holds " + std::to_string(images.size() - 16) + " pixel bytes, but its header says " +
                       std::to_string(set.count) + " images of " + std::to_string(set.height) + "x" +
                       std::to_string(set.width) + ": the file is truncated or damaged");
  }
  if (BigEndian32(labels, 4) != set.count || labels.size() != 8 + set.count) {
    throw DatasetError(labels_path + " does not hold one label per image of " + images_path);
  }
  set.pixels.assign(images.begin() + 16, images.end());
  set.labels.assign(labels.begin() + 8, labels.end());
  return set;
}

ImageSet ReadCifar10(const std::vector<std::string>& batch_paths) {
  constexpr std::size_t kRecord = 1 + 3 * 32 * 32;
  ImageSet set;
  set.channels = 3;
  set.height = 32;
  set.width = 32;
  for (const std::string& path : batch_paths) {
    const std::vector<std::uint8_t> bytes = ReadMaybeCompressed(path);
    if (bytes.empty() || bytes.size() % kRecord != 0) {
      throw DatasetError(path + " is not a CIFAR-10 binary batch: its size (" + std::to_string(bytes.size()) +
                         " bytes) is not a multiple of " + std::to_string(kRecord));
    }
    for (std::size_t offset = 0; offset < bytes.size(); offset += kRecord) {
      if (bytes[offset] > 9) {
        throw DatasetError(path + ": record " + std::to_string(offset / kRecord) + " has label " +
                           std::to_string(bytes[offset]) + " (CIFAR-10 labels are 0-9)");
      }
      set.labels.push_back(bytes[offset]);
      set.pixels.insert(set.pixels.end(), bytes.begin() + static_cast<std::ptrdiff_t>(offset + 1),
                        bytes.begin() + static_cast<std::ptrdiff_t>(offset + kRecord));
      ++set.count;
    }
  }
  return set;
}

}  // namespace sray::examples
