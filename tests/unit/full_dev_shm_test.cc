// A /dev/shm that is full beyond the object store's own count (other jobs'
// files, files freed while still mapped) is a full store to the user
// (ObjectStoreFullError through kResourceExhausted), with what to do, not a
// bare "No space left on device". Run only through ctest's
// unit.full_dev_shm_is_a_full_store, which gives this process a private
// 8 MiB /dev/shm (tests/with_small_dev_shm.sh).

#include <gtest/gtest.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "object/mapped_file.h"
#include "object/object_store.h"

namespace sray::object {
namespace {

class FullDevShm : public ::testing::Test {
 protected:
  void SetUp() override {
    struct statvfs shm {};
    ASSERT_EQ(::statvfs("/dev/shm", &shm), 0);
    if (static_cast<std::uint64_t>(shm.f_blocks) * shm.f_frsize > (16U << 20)) {
      GTEST_SKIP() << "needs the small /dev/shm of unit.full_dev_shm_is_a_full_store";
    }
    spill_ = std::filesystem::temp_directory_path() /
             ("sray-full-shm-test-" + std::to_string(::getpid()));
    auto store = ObjectStore::Open({.shared_memory_directory = "/dev/shm",
                                    .name_prefix = "sray.fullshm",
                                    .spill_directory = spill_,
                                    .capacity = 6U << 20,
                                    .node_id = 0,
                                    .on_spilled = {},
                                    .while_copying = {}});
    ASSERT_TRUE(store.ok()) << store.status().message();
    store_ = std::move(store).value();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove("/dev/shm/other-jobs-file");
  }
  // Fills /dev/shm outside the store, leaving less than `left` bytes.
  static void FillAllBut(std::uint64_t left) {
    struct statvfs shm {};
    ASSERT_EQ(::statvfs("/dev/shm", &shm), 0);
    const std::uint64_t free_bytes = static_cast<std::uint64_t>(shm.f_bavail) * shm.f_frsize;
    ASSERT_GT(free_bytes, left);
    std::ofstream("/dev/shm/other-jobs-file", std::ios::binary | std::ios::app)
        << std::string(free_bytes - left, 'x');
  }

  std::filesystem::path spill_;
  std::unique_ptr<ObjectStore> store_;
};

// Before: "cannot reserve ... bytes: No space left on device" (an I/O error).
TEST_F(FullDevShm, ACreateThatDevShmCannotHoldIsAFullStore) {
  auto path = store_->Create({1, 1}, 2U << 20, true);
  ASSERT_TRUE(path.ok()) << path.status().message();
  FillAllBut(1U << 20);
  auto file = MappedFile::Create(*path, 2U << 20);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kResourceExhausted) << file.status().message();
  EXPECT_NE(file.status().message().find("lower object_store_memory"), std::string::npos)
      << file.status().message();
  store_->Abort({1, 1});
}

// Before: "cannot restore spilled object ...: No space left on device".
TEST_F(FullDevShm, ARestoreThatDevShmCannotHoldIsAFullStore) {
  for (std::uint64_t index = 1; index <= 3; ++index) {
    auto path = store_->Create({2, index}, 2U << 20, true);
    ASSERT_TRUE(path.ok()) << path.status().message();
    auto file = MappedFile::Create(*path, 2U << 20);
    ASSERT_TRUE(file.ok()) << file.status().message();
    std::memset((*file)->data(), static_cast<int>(index), 2U << 20);
    store_->Seal({2, index});
  }
  ASSERT_TRUE(store_->Create({2, 4}, 2U << 20, true).ok());  // spills {2,1}
  store_->Abort({2, 4});                                     // room again in the store's count
  FillAllBut(1U << 20);
  auto restored = store_->Locate({2, 1});
  ASSERT_FALSE(restored.ok());
  EXPECT_EQ(restored.status().code(), StatusCode::kResourceExhausted)
      << restored.status().message();
  EXPECT_NE(restored.status().message().find("is full"), std::string::npos)
      << restored.status().message();
}

}  // namespace
}  // namespace sray::object
