// Remote memory keys (transport/memory_key) and reads of a same-host peer's
// file (transport/same_host_reads), on real files in /dev/shm.
#include "transport/same_host_reads.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "transport/memory_key.h"

namespace sray::transport {
namespace {

MemoryKey KeyWithFile() {
  return MemoryKey{.ucx_key = BytesOf("ucx key bytes"),
                   .address = 0x7f0000001000,
                   .length = 1 << 20,
                   .file = SharedFileOfMemory{.host = "boot-id",
                                              .path = "/dev/shm/sray.1.0.n0.object",
                                              .device = 44,
                                              .inode = 1234,
                                              .offset = 4096}};
}

TEST(MemoryKeyTest, AKeyWithAndWithoutItsFileDecodesAsEncoded) {
  const MemoryKey with_file = KeyWithFile();
  auto decoded = DecodeMemoryKey(EncodeMemoryKey(with_file));
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_EQ(decoded->ucx_key, with_file.ucx_key);
  EXPECT_EQ(decoded->address, with_file.address);
  EXPECT_EQ(decoded->length, with_file.length);
  ASSERT_TRUE(decoded->file.has_value());
  EXPECT_EQ(decoded->file->host, "boot-id");
  EXPECT_EQ(decoded->file->path, with_file.file->path);
  EXPECT_EQ(decoded->file->device, 44U);
  EXPECT_EQ(decoded->file->inode, 1234U);
  EXPECT_EQ(decoded->file->offset, 4096U);

  MemoryKey without_file = with_file;
  without_file.file.reset();
  decoded = DecodeMemoryKey(EncodeMemoryKey(without_file));
  ASSERT_TRUE(decoded.ok()) << decoded.status().message();
  EXPECT_FALSE(decoded->file.has_value());
  EXPECT_EQ(decoded->ucx_key, with_file.ucx_key);
}

// The key travels in messages from other processes: every cut, an extra
// byte, another magic number and a length beyond the input are refused.
TEST(MemoryKeyTest, EveryTruncatedOrAlteredKeyIsRefused) {
  const Bytes encoded = EncodeMemoryKey(KeyWithFile());
  for (std::size_t cut = 0; cut < encoded.size(); ++cut) {
    EXPECT_FALSE(DecodeMemoryKey(std::span(encoded).first(cut)).ok()) << "cut at " << cut;
  }
  Bytes longer = encoded;
  longer.push_back(std::byte{0});
  EXPECT_FALSE(DecodeMemoryKey(longer).ok());
  Bytes other_magic = encoded;
  other_magic[0] ^= std::byte{1};
  EXPECT_FALSE(DecodeMemoryKey(other_magic).ok());
  Bytes huge_length = encoded;
  huge_length[7] = std::byte{0x7f};  // the UCX key's length, top byte
  auto refused = DecodeMemoryKey(huge_length);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("malformed remote memory key"), std::string::npos);
}

TEST(MemoryKeyTest, ThisHostHasABootId) {
  EXPECT_EQ(ThisHostId().size(), 36U) << ThisHostId();
}

class SameHostReadsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = "/dev/shm/sray-same-host-test." + std::to_string(::getpid());
    const int descriptor = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(descriptor, 0);
    contents_.resize(64 * 1024);
    for (std::size_t i = 0; i < contents_.size(); ++i) contents_[i] = static_cast<char>(i % 241);
    ASSERT_EQ(::write(descriptor, contents_.data(), contents_.size()),
              static_cast<ssize_t>(contents_.size()));
    struct stat status {};
    ASSERT_EQ(::fstat(descriptor, &status), 0);
    ::close(descriptor);
    // As if registered at address 0x10000, from the file's byte 0.
    key_ = MemoryKey{.ucx_key = {},
                     .address = 0x10000,
                     .length = contents_.size(),
                     .file = SharedFileOfMemory{.host = ThisHostId(),
                                                .path = path_,
                                                .device = status.st_dev,
                                                .inode = status.st_ino,
                                                .offset = 0}};
  }
  void TearDown() override { ::unlink(path_.c_str()); }

  std::string path_;
  std::string contents_;
  MemoryKey key_;
};

TEST_F(SameHostReadsTest, ReadsTheRangeAndKeepsTheMappingUntilItIsIdle) {
  SameHostReads reads;
  std::string copy(1000, '\0');
  ASSERT_TRUE(reads.Read(key_, 0x10000 + 500, copy.data(), copy.size()));
  EXPECT_EQ(copy, contents_.substr(500, 1000));
  EXPECT_EQ(reads.reads(), 1U);
  EXPECT_EQ(reads.kept_mappings(), 1U);
  reads.DropIdle(std::chrono::steady_clock::now());
  EXPECT_EQ(reads.kept_mappings(), 1U);
  reads.DropIdle(std::chrono::steady_clock::now() + SameHostReads::kKeepIdle);
  EXPECT_EQ(reads.kept_mappings(), 0U);
}

TEST_F(SameHostReadsTest, AnotherHostsFileOrARangeOutsideTheMemoryIsNotRead) {
  SameHostReads reads;
  std::string copy(16, '\0');
  MemoryKey elsewhere = key_;
  elsewhere.file->host = "another host's boot id";
  EXPECT_FALSE(reads.Read(elsewhere, 0x10000, copy.data(), copy.size()));
  EXPECT_FALSE(reads.Read(key_, 0x10000 - 1, copy.data(), copy.size()));
  EXPECT_FALSE(reads.Read(key_, 0x10000 + contents_.size() - 8, copy.data(), copy.size()));
  MemoryKey other_file = key_;
  other_file.file->inode += 1;
  EXPECT_FALSE(reads.Read(other_file, 0x10000, copy.data(), copy.size()));
  MemoryKey no_file = key_;
  no_file.file.reset();
  EXPECT_FALSE(reads.Read(no_file, 0x10000, copy.data(), copy.size()));
  EXPECT_EQ(reads.reads(), 0U);
  EXPECT_EQ(reads.kept_mappings(), 0U);
}

// A kept mapping would hold a deleted file's memory: housekeeping lets it go
// at once, idle or not.
TEST_F(SameHostReadsTest, ADeletedFileIsNotReadAndItsMappingIsLetGo) {
  SameHostReads reads;
  std::string copy(16, '\0');
  ASSERT_TRUE(reads.Read(key_, 0x10000, copy.data(), copy.size()));
  ASSERT_EQ(reads.kept_mappings(), 1U);
  ASSERT_EQ(::unlink(path_.c_str()), 0);
  EXPECT_FALSE(reads.Read(key_, 0x10000, copy.data(), copy.size()));
  reads.DropIdle(std::chrono::steady_clock::now());
  EXPECT_EQ(reads.kept_mappings(), 0U);
}

// A file read before is checked through its kept mapping's descriptor: one
// the owner shrank since (recycled for a smaller object) is read only inside
// its new size (past it, the mapping would fault with SIGBUS), and one that
// grew is mapped again to reach its new bytes.
TEST_F(SameHostReadsTest, AFileResizedSinceItsLastReadIsReadOnlyWithinItsNewSize) {
  SameHostReads reads;
  std::string copy(16, '\0');
  ASSERT_TRUE(reads.Read(key_, 0x10000 + contents_.size() - 16, copy.data(), copy.size()));
  ASSERT_EQ(::truncate(path_.c_str(), 4096), 0);
  EXPECT_FALSE(reads.Read(key_, 0x10000 + contents_.size() - 16, copy.data(), copy.size()));
  ASSERT_TRUE(reads.Read(key_, 0x10000 + 4096 - 16, copy.data(), copy.size()));
  EXPECT_EQ(copy, contents_.substr(4096 - 16, 16));

  MemoryKey grown = key_;
  grown.length = 2 * contents_.size();
  ASSERT_EQ(::truncate(path_.c_str(), static_cast<off_t>(grown.length)), 0);
  EXPECT_TRUE(reads.Read(grown, 0x10000 + grown.length - 16, copy.data(), copy.size()));
  EXPECT_EQ(copy, std::string(16, '\0'));
  EXPECT_EQ(reads.reads(), 3U);
  EXPECT_EQ(reads.kept_mappings(), 1U);
}

// A file of 16 known bytes at `path`, and a key for it as if registered at 0x1000.
MemoryKey SixteenByteFile(const std::string& path) {
  const int descriptor = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  EXPECT_GE(descriptor, 0);
  EXPECT_EQ(::write(descriptor, "0123456789abcdef", 16), 16);
  struct stat status {};
  EXPECT_EQ(::fstat(descriptor, &status), 0);
  ::close(descriptor);
  return MemoryKey{.ucx_key = {},
                   .address = 0x1000,
                   .length = 16,
                   .file = SharedFileOfMemory{.host = ThisHostId(),
                                              .path = path,
                                              .device = status.st_dev,
                                              .inode = status.st_ino,
                                              .offset = 0}};
}

std::string BoundTestPath(std::size_t index) {
  return "/dev/shm/sray-same-host-test." + std::to_string(::getpid()) + ".bound" +
         std::to_string(index);
}

// At most kKeptMappings files stay mapped: the least recently read goes.
TEST(SameHostReadsBounds, AtMostKeptMappingsFilesStayMapped) {
  SameHostReads reads;
  for (std::size_t i = 0; i <= SameHostReads::kKeptMappings; ++i) {
    const MemoryKey key = SixteenByteFile(BoundTestPath(i));
    std::string copy(16, '\0');
    EXPECT_TRUE(reads.Read(key, 0x1000, copy.data(), copy.size()));
    EXPECT_EQ(copy, "0123456789abcdef");
  }
  EXPECT_EQ(reads.kept_mappings(), SameHostReads::kKeptMappings);
  for (std::size_t i = 0; i <= SameHostReads::kKeptMappings; ++i)
    ::unlink(BoundTestPath(i).c_str());
}

// A file read again through its kept mapping is the most recent: the bound
// drops a file read longer ago instead (the fast path of a pull once left
// the order alone, so the file read most often went first).
TEST(SameHostReadsBounds, AFileReadAgainOutlivesFilesReadLongerAgo) {
  SameHostReads reads;
  std::vector<MemoryKey> keys;
  std::string copy(16, '\0');
  for (std::size_t i = 0; i < SameHostReads::kKeptMappings; ++i) {
    keys.push_back(SixteenByteFile(BoundTestPath(i)));
    ASSERT_TRUE(reads.Read(keys.back(), 0x1000, copy.data(), copy.size()));
  }
  ASSERT_TRUE(reads.Read(keys[0], 0x1000, copy.data(), copy.size()));  // through its mapping
  const MemoryKey newest = SixteenByteFile(BoundTestPath(SameHostReads::kKeptMappings));
  ASSERT_TRUE(reads.Read(newest, 0x1000, copy.data(), copy.size()));
  // Moved away, a file can be read only through a mapping kept of it.
  for (std::size_t i = 0; i < 2; ++i) {
    ASSERT_EQ(::rename(BoundTestPath(i).c_str(), (BoundTestPath(i) + ".moved").c_str()), 0);
  }
  EXPECT_TRUE(reads.Read(keys[0], 0x1000, copy.data(), copy.size()))
      << "the file read most recently but one lost its mapping";
  EXPECT_FALSE(reads.Read(keys[1], 0x1000, copy.data(), copy.size()))
      << "the least recently read file kept its mapping";
  for (std::size_t i = 0; i <= SameHostReads::kKeptMappings; ++i) {
    ::unlink(BoundTestPath(i).c_str());
    ::unlink((BoundTestPath(i) + ".moved").c_str());
  }
}

}  // namespace
}  // namespace sray::transport
