#include "../../../examples/train/datasets.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../test_files.h"

namespace sray::examples {
namespace {

std::string BigEndian(std::uint32_t value) {
  return {static_cast<char>(value >> 24U), static_cast<char>((value >> 16U) & 255U),
          static_cast<char>((value >> 8U) & 255U), static_cast<char>(value & 255U)};
}

void WriteGzip(const std::string& path, const std::string& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  gzclose(file);
}

TEST(IdxReader, ReadsGzippedImagesAndLabels) {
  sray::testing::ScratchDirectory scratch;
  std::string images = BigEndian(0x803) + BigEndian(2) + BigEndian(2) + BigEndian(3);
  for (int pixel = 0; pixel < 12; ++pixel) images += static_cast<char>(pixel * 20);
  const std::string labels = BigEndian(0x801) + BigEndian(2) + std::string("\x07\x02", 2);
  WriteGzip((scratch.path() / "images.gz").string(), images);
  WriteGzip((scratch.path() / "labels.gz").string(), labels);
  const ImageSet set = ReadIdx((scratch.path() / "images.gz").string(), (scratch.path() / "labels.gz").string());
  EXPECT_EQ(set.count, 2U);
  EXPECT_EQ(set.height, 2U);
  EXPECT_EQ(set.width, 3U);
  EXPECT_EQ(set.pixels[11], 220);
  EXPECT_EQ(set.labels, (std::vector<std::uint8_t>{7, 2}));
}

TEST(IdxReader, RefusesATruncatedFileNamingIt) {
  sray::testing::ScratchDirectory scratch;
  const std::string images = BigEndian(0x803) + BigEndian(5) + BigEndian(28) + BigEndian(28) + "short";
  WriteGzip((scratch.path() / "images.gz").string(), images);
  WriteGzip((scratch.path() / "labels.gz").string(), BigEndian(0x801) + BigEndian(5) + "12345");
  try {
    ReadIdx((scratch.path() / "images.gz").string(), (scratch.path() / "labels.gz").string());
    FAIL() << "a truncated file was accepted";
  } catch (const DatasetError& error) {
    EXPECT_NE(std::string(error.what()).find("truncated"), std::string::npos) << error.what();
  }
  EXPECT_THROW(ReadIdx("/nonexistent/images.gz", "/nonexistent/labels.gz"), DatasetError);
}

// Before: a gzip stream cut short read as an early end of file, and a CIFAR
// batch cut at a record boundary passed as a smaller data set.
TEST(CompressedFiles, AGzipStreamCutShortIsAnErrorNotAShorterFile) {
  sray::testing::ScratchDirectory scratch;
  std::string bytes;
  for (int index = 0; index < 20000; ++index) bytes += static_cast<char>((index * 7919) % 251);
  const std::string whole = (scratch.path() / "whole.gz").string();
  WriteGzip(whole, bytes);
  EXPECT_EQ(ReadMaybeCompressed(whole).size(), bytes.size());
  const auto size = std::filesystem::file_size(whole);
  std::filesystem::copy_file(whole, scratch.path() / "cut.gz");
  std::filesystem::resize_file(scratch.path() / "cut.gz", size / 2);
  try {
    const auto read = ReadMaybeCompressed((scratch.path() / "cut.gz").string());
    FAIL() << "a truncated gzip file read as " << read.size() << " bytes";
  } catch (const DatasetError& error) {
    EXPECT_NE(std::string(error.what()).find("truncated"), std::string::npos) << error.what();
  }
  // A plain file still reads as it is.
  const auto plain = scratch.Write("plain.bin", "abc");
  EXPECT_EQ(ReadMaybeCompressed(plain.string()).size(), 3U);
}

TEST(Cifar10Reader, ReadsBinaryBatchesRecordByRecord) {
  sray::testing::ScratchDirectory scratch;
  std::string batch;
  for (int record = 0; record < 3; ++record) {
    batch += static_cast<char>(record + 4);
    batch += std::string(3 * 32 * 32, static_cast<char>(record));
  }
  const auto path = scratch.Write("data_batch_1.bin", batch);
  const ImageSet set = ReadCifar10({path.string()});
  EXPECT_EQ(set.count, 3U);
  EXPECT_EQ(set.channels, 3U);
  EXPECT_EQ(set.labels, (std::vector<std::uint8_t>{4, 5, 6}));
  EXPECT_EQ(set.pixels[2 * 3 * 32 * 32], 2);
  const auto broken = scratch.Write("data_batch_2.bin", batch.substr(0, 100));
  EXPECT_THROW(ReadCifar10({broken.string()}), DatasetError);
}

}  // namespace
}  // namespace sray::examples
