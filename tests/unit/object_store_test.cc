#include "object/object_store.h"
#include "object/store_capacity.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "object/mapped_file.h"

namespace sray::object {
namespace {

class ObjectStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ =
        std::filesystem::temp_directory_path() / ("sray-store-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(directory_ / "shm");
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  std::unique_ptr<ObjectStore> Open(std::uint64_t capacity) {
    auto store = ObjectStore::Open(
        {.shared_memory_directory = directory_ / "shm",
         .name_prefix = "sray.test.1.n0",
         .spill_directory = directory_ / "spill",
         .capacity = capacity,
         .node_id = 0,
         .on_spilled = [this](std::uint64_t bytes) { spilled_bytes_.push_back(bytes); },
         .while_copying =
             [this](const ObjectId& id) {
               if (while_copying_) while_copying_(id);
             }});
    EXPECT_TRUE(store.ok()) << store.status().message();
    return std::move(store).value();
  }

  static void Write(ObjectStore& store, const ObjectId& id, char fill, std::size_t size) {
    auto path = store.Create(id, size, true);
    ASSERT_TRUE(path.ok()) << path.status().message();
    auto file = MappedFile::Create(*path, size);
    ASSERT_TRUE(file.ok()) << file.status().message();
    std::memset((*file)->data(), fill, size);
    store.Seal(id);
  }

  static char FirstByte(ObjectStore& store, const ObjectId& id) {
    auto path = store.Locate(id);
    EXPECT_TRUE(path.ok()) << path.status().message();
    auto file = MappedFile::OpenReadOnly(*path);
    EXPECT_TRUE(file.ok());
    return (*file)->view().front();
  }

  // The files in the spill directory, and the store's restore leftovers.
  [[nodiscard]] std::size_t SpillFiles() const {
    std::size_t count = 0;
    for (const auto& file : std::filesystem::directory_iterator(directory_ / "spill")) {
      (void)file;
      ++count;
    }
    return count;
  }
  [[nodiscard]] std::size_t RestoringFiles() const {
    std::size_t count = 0;
    for (const auto& file : std::filesystem::directory_iterator(directory_ / "shm")) {
      if (file.path().filename().string().find(".restoring.") != std::string::npos) ++count;
    }
    return count;
  }

  std::filesystem::path directory_;
  std::vector<std::uint64_t> spilled_bytes_;  // told by the store, one per spill
  // Runs as each spill or restore copies, without the store's lock.
  std::function<void(const ObjectId&)> while_copying_;
};

// Spill files hold the job's objects: the directory is the job user's alone,
// and one that others may enter (planted, or left by an old version) is refused.
TEST_F(ObjectStoreTest, TheSpillDirectoryIsTheJobUsersAlone) {
  auto store = Open(1 << 20);
  struct stat info {};
  ASSERT_EQ(::stat((directory_ / "spill").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 07777, 0700U);
  store.reset();  // removes its spill directory
  std::filesystem::create_directories(directory_ / "spill");
  std::filesystem::permissions(directory_ / "spill", std::filesystem::perms(0755));
  auto refused = ObjectStore::Open({.shared_memory_directory = directory_ / "shm",
                                    .name_prefix = "sray.test.1.n0",
                                    .spill_directory = directory_ / "spill",
                                    .capacity = 1 << 20,
                                    .node_id = 0,
                                    .on_spilled = {},
                                    .while_copying = {}});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("spill directory"), std::string::npos) << refused.status().message();
}

TEST_F(ObjectStoreTest, SpillsLeastRecentlyUsedWhenFullAndRestoresOnDemand) {
  auto store = Open(3000);
  Write(*store, {1, 1}, 'a', 1000);
  Write(*store, {1, 2}, 'b', 1000);
  Write(*store, {1, 3}, 'c', 1000);
  (void)store->Locate({1, 1});  // now {1,2} is the coldest
  Write(*store, {1, 4}, 'd', 1000);
  EXPECT_EQ(store->Usage().spilled, 1000u);
  EXPECT_FALSE(std::filesystem::exists(store->PathOf({1, 2})));
  EXPECT_EQ(FirstByte(*store, {1, 2}), 'b');  // restored, something else spilled
  EXPECT_EQ(store->Usage().in_memory, 3000u);
  EXPECT_EQ(store->Usage().spilled, 1000u);
  // Each spill was told (for the node's events), with its size.
  EXPECT_EQ(spilled_bytes_, (std::vector<std::uint64_t>{1000, 1000}));
}

TEST_F(ObjectStoreTest, PinnedObjectsAreNotSpilledAndAFullStoreSaysWhy) {
  auto store = Open(2000);
  Write(*store, {1, 1}, 'a', 1000);
  Write(*store, {1, 2}, 'b', 1000);
  store->Pin({1, 1});
  store->Pin({1, 2});
  auto refused = store->Create({1, 3}, 1000, true);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("2000 of 2000 bytes"), std::string::npos)
      << refused.status().message();
  auto huge = store->Create({1, 4}, 5000, true);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("larger than the whole object store"), std::string::npos);
}

// Before: the store's lock was held while a spill copied its file, and the
// seals, frees and pins the node manager serves on the transport's thread
// waited behind it (a spill longer than node_timeout could get the node
// declared lost).
TEST_F(ObjectStoreTest, ASpillsCopyDoesNotHoldTheStoreMeanwhile) {
  auto store = Open(2000);
  Write(*store, {1, 1}, 'a', 1000);
  auto unsealed = store->Create({1, 2}, 1000, true);  // written, not sealed yet
  ASSERT_TRUE(unsealed.ok()) << unsealed.status().message();
  ASSERT_TRUE(MappedFile::Create(*unsealed, 1000).ok());
  std::promise<void> copying;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  while_copying_ = [&](const ObjectId&) {
    copying.set_value();
    released.wait();
  };
  auto create = std::async(std::launch::async, [&] { return store->Create({1, 3}, 1000, true); });
  copying.get_future().wait();
  auto meanwhile = std::async(std::launch::async, [&] {
    store->Seal({1, 2});
    store->Pin({1, 2});
    store->Unpin({1, 2});
    (void)store->Usage();
    return store->Locate({1, 1}).ok();  // being spilled: still readable in memory
  });
  const bool answered = meanwhile.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  while_copying_ = nullptr;
  release.set_value();
  ASSERT_TRUE(answered) << "the store waited for the spill's copy";
  EXPECT_TRUE(meanwhile.get());
  auto created = create.get();
  ASSERT_TRUE(created.ok()) << created.status().message();
  // {1,1}, read while it was copied, stayed; {1,2} went instead.
  EXPECT_EQ(store->Usage().spilled, 1000u);
  EXPECT_TRUE(std::filesystem::exists(store->PathOf({1, 1})));
  EXPECT_EQ(FirstByte(*store, {1, 1}), 'a');
}

TEST_F(ObjectStoreTest, AnObjectFreedWhileItSpillsLeavesNoSpillFile) {
  auto store = Open(2000);
  Write(*store, {1, 1}, 'a', 1000);
  Write(*store, {1, 2}, 'b', 1000);
  while_copying_ = [&](const ObjectId& id) { store->Free(id); };
  auto created = store->Create({1, 3}, 1000, true);
  ASSERT_TRUE(created.ok()) << created.status().message();
  EXPECT_FALSE(store->Contains({1, 1}));
  EXPECT_EQ(store->Usage().in_memory, 2000u);
  EXPECT_EQ(store->Usage().spilled, 0u);
  EXPECT_EQ(SpillFiles(), 0u);
  EXPECT_TRUE(spilled_bytes_.empty());
}

TEST_F(ObjectStoreTest, AnObjectPinnedWhileItSpillsStaysInMemoryAndAnotherGoes) {
  auto store = Open(2000);
  Write(*store, {1, 1}, 'a', 1000);
  Write(*store, {1, 2}, 'b', 1000);
  while_copying_ = [&](const ObjectId& id) {
    if (id == ObjectId{1, 1}) store->Pin(id);  // a pull began reading it
  };
  auto created = store->Create({1, 3}, 1000, true);
  ASSERT_TRUE(created.ok()) << created.status().message();
  EXPECT_TRUE(std::filesystem::exists(store->PathOf({1, 1})));
  EXPECT_FALSE(std::filesystem::exists(store->PathOf({1, 2})));
  EXPECT_EQ(store->Usage().spilled, 1000u);
  EXPECT_EQ(SpillFiles(), 1u);
  EXPECT_EQ(spilled_bytes_, (std::vector<std::uint64_t>{1000}));
}

// Found by review: a reader that located an object (without pinning it)
// while it was copied to disk got a path the spill then removed, and its
// retry restored the object at once.
TEST_F(ObjectStoreTest, AnObjectReadWhileItSpillsStaysInMemoryAndAnotherGoes) {
  auto store = Open(2000);
  Write(*store, {1, 1}, 'a', 1000);
  Write(*store, {1, 2}, 'b', 1000);
  std::string located;
  while_copying_ = [&](const ObjectId& id) {
    if (id == ObjectId{1, 1} && located.empty()) located = store->Locate(id)->string();
  };
  auto created = store->Create({1, 3}, 1000, true);
  ASSERT_TRUE(created.ok()) << created.status().message();
  EXPECT_EQ(located, store->PathOf({1, 1}).string());
  EXPECT_TRUE(std::filesystem::exists(store->PathOf({1, 1})));
  EXPECT_FALSE(std::filesystem::exists(store->PathOf({1, 2})));
  EXPECT_EQ(SpillFiles(), 1u);
}

// A restore copies beside the object's name and renames once whole: an
// object of the same id made meanwhile (a recomputation) keeps its bytes.
TEST_F(ObjectStoreTest, ARestoreRacingANewObjectOfTheSameIdLeavesTheNewOne) {
  auto store = Open(2000);
  Write(*store, {1, 1}, 'a', 1000);
  Write(*store, {1, 2}, 'b', 1000);
  Write(*store, {1, 3}, 'c', 1000);  // spills {1,1}
  ASSERT_EQ(store->Usage().spilled, 1000u);
  store->Free({1, 2});
  bool recomputed = false;
  while_copying_ = [&](const ObjectId& id) {
    if (id != ObjectId{1, 1} || recomputed) return;
    recomputed = true;
    Write(*store, {1, 1}, 'n', 1000);
  };
  auto restored = store->Locate({1, 1});
  EXPECT_EQ(restored.status().code(), StatusCode::kNotFound) << "its entry was replaced";
  EXPECT_EQ(FirstByte(*store, {1, 1}), 'n');
  EXPECT_EQ(RestoringFiles(), 0u);
  EXPECT_EQ(SpillFiles(), 0u);
  EXPECT_EQ(store->Usage().in_memory, 2000u);
  EXPECT_EQ(store->Usage().spilled, 0u);
}

TEST_F(ObjectStoreTest, AReaderOfAnObjectBeingRestoredWaitsForThatRestore) {
  auto store = Open(2000);
  Write(*store, {1, 1}, 'a', 1000);
  Write(*store, {1, 2}, 'b', 1000);
  Write(*store, {1, 3}, 'c', 1000);  // spills {1,1}
  store->Free({1, 2});
  std::future<char> second;
  while_copying_ = [&](const ObjectId& id) {
    if (id != ObjectId{1, 1} || second.valid()) return;
    second = std::async(std::launch::async, [&] { return FirstByte(*store, {1, 1}); });
    // The second reader finds the restore under way and waits for it.
    EXPECT_EQ(second.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  };
  EXPECT_EQ(FirstByte(*store, {1, 1}), 'a');
  EXPECT_EQ(second.get(), 'a');
  EXPECT_EQ(store->Usage().in_memory, 2000u);
  EXPECT_EQ(store->Usage().spilled, 0u);
  EXPECT_EQ(RestoringFiles(), 0u);
}

// Found by local.tasks_and_objects: two readers of one spilled object (a
// task here, a pull for another node) both made room for its restore; the
// second, once the first had restored it, found only that object in memory,
// pinned by itself, and failed "held by objects in use that cannot be
// spilled".
TEST_F(ObjectStoreTest, TwoReadersOfASpilledObjectBothGetItWhenOnlyItFits) {
  auto store = Open(1500);
  Write(*store, {1, 1}, 'a', 1000);
  Write(*store, {1, 2}, 'b', 1000);  // spills {1,1}
  ASSERT_EQ(store->Usage().spilled, 1000u);
  std::future<Result<std::filesystem::path>> second;
  while_copying_ = [&](const ObjectId& id) {
    if (id != ObjectId{1, 2} || second.valid()) return;
    // {1,2} is being spilled to make room for {1,1}: a second reader of
    // {1,1} comes now, and waits for that copy to make room of its own.
    second = std::async(std::launch::async, [&] { return store->LocateAndPin({1, 1}); });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  };
  auto first = store->LocateAndPin({1, 1});
  ASSERT_TRUE(first.ok()) << first.status().message();
  ASSERT_TRUE(second.valid());
  auto also = second.get();
  ASSERT_TRUE(also.ok()) << also.status().message();
  EXPECT_EQ(*first, *also);
  store->Unpin({1, 1});
  store->Unpin({1, 1});
  EXPECT_EQ(FirstByte(*store, {1, 1}), 'a');
  EXPECT_EQ(store->Usage().in_memory, 1000u);
  EXPECT_EQ(store->Usage().spilled, 1000u);
}

TEST_F(ObjectStoreTest, AnObjectFreedWhileItIsRestoredLeavesNothing) {
  auto store = Open(2000);
  Write(*store, {1, 1}, 'a', 1000);
  Write(*store, {1, 2}, 'b', 1000);
  Write(*store, {1, 3}, 'c', 1000);  // spills {1,1}
  store->Free({1, 2});
  while_copying_ = [&](const ObjectId& id) {
    if (id == ObjectId{1, 1}) store->Free(id);
  };
  EXPECT_EQ(store->Locate({1, 1}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store->Usage().in_memory, 1000u);
  EXPECT_EQ(store->Usage().spilled, 0u);
  EXPECT_EQ(RestoringFiles(), 0u);
  EXPECT_EQ(SpillFiles(), 0u);
  EXPECT_FALSE(std::filesystem::exists(store->PathOf({1, 1})));
}

// Before: the vanished file's object stayed the coldest victim, its spill
// failed with "its disk cannot take more", and every later Create that
// needed room failed the same way.
TEST_F(ObjectStoreTest, AnObjectWhoseFileVanishedGivesWayInsteadOfBlockingTheStore) {
  auto store = Open(2000);
  Write(*store, {1, 1}, 'a', 1000);
  Write(*store, {1, 2}, 'b', 1000);
  ASSERT_EQ(::unlink(store->PathOf({1, 1}).c_str()), 0);  // /dev/shm wiped by hand
  auto room = store->Create({1, 3}, 1000, true);
  ASSERT_TRUE(room.ok()) << room.status().message();
  store->Seal({1, 3});
  EXPECT_EQ(store->Usage().in_memory, 2000u);
  EXPECT_EQ(store->Usage().spilled, 0u);
  EXPECT_EQ(store->Locate({1, 1}).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(FirstByte(*store, {1, 2}), 'b');
}

TEST_F(ObjectStoreTest, CopiesFromOtherNodesAreDroppedNotSpilled) {
  auto store = Open(2000);
  auto copy = store->Create({2, 1}, 1000, false);
  ASSERT_TRUE(copy.ok());
  ASSERT_TRUE(MappedFile::Create(*copy, 1000).ok());
  store->Seal({2, 1});
  Write(*store, {1, 1}, 'a', 1000);
  Write(*store, {1, 2}, 'b', 1000);
  EXPECT_FALSE(store->Contains({2, 1}));
  EXPECT_EQ(store->Usage().spilled, 0u);
}

// What a dead task attempt left is discarded: its own result, created or
// sealed; not a copy pulled from another node (a retry's result read here),
// and not an object a pull or a task is reading.
TEST_F(ObjectStoreTest, DiscardingADeadAttemptsResultSparesPulledCopiesAndPinnedObjects) {
  auto store = Open(10000);
  Write(*store, {1, 1}, 'a', 1000);              // sealed by the dead attempt
  ASSERT_TRUE(store->Create({1, 2}, 1000, true).ok());  // created, never sealed
  auto pulled = store->Create({1, 3}, 1000, false);
  ASSERT_TRUE(pulled.ok());
  ASSERT_TRUE(MappedFile::Create(*pulled, 1000).ok());
  store->Seal({1, 3});
  Write(*store, {1, 4}, 'd', 1000);
  store->Pin({1, 4});
  for (const ObjectId id : {ObjectId{1, 1}, ObjectId{1, 2}, ObjectId{1, 3}, ObjectId{1, 4}}) {
    store->DiscardPrimary(id);
  }
  EXPECT_FALSE(store->Contains({1, 1}));
  EXPECT_FALSE(store->Contains({1, 2}));
  EXPECT_TRUE(store->Contains({1, 3}));
  EXPECT_TRUE(store->Contains({1, 4}));
  EXPECT_EQ(store->Usage().in_memory, 2000u);
  store->Unpin({1, 4});
}

// An actor call's result whose process died before answering is discarded
// only if that very attempt made it: a retry's result of the same id, made in
// a later incarnation by another process or by the same one, stays, as do
// pulled copies and pinned objects.
TEST_F(ObjectStoreTest, AnOrphanedResultIsDiscardedOnlyWhereThatAttemptMadeIt) {
  constexpr ObjectMaker kDeadAttempt{.rank = 7, .incarnation = 0};
  auto store = Open(10000);
  ASSERT_TRUE(store->Create({1, 1}, 1000, true, kDeadAttempt).ok());
  store->Seal({1, 1});
  ASSERT_TRUE(store->Create({1, 2}, 1000, true, kDeadAttempt).ok());  // never sealed
  ASSERT_TRUE(store->Create({1, 3}, 1000, true, {.rank = 9, .incarnation = 1}).ok());
  store->Seal({1, 3});
  ASSERT_TRUE(store->Create({1, 4}, 1000, true, {.rank = 7, .incarnation = 1}).ok());
  store->Seal({1, 4});
  ASSERT_TRUE(store->Create({1, 5}, 1000, true, kDeadAttempt).ok());
  store->Seal({1, 5});
  store->Pin({1, 5});
  ASSERT_TRUE(store->Create({1, 6}, 1000, false, kDeadAttempt).ok());  // a pulled copy
  store->Seal({1, 6});
  for (std::uint64_t index = 1; index <= 6; ++index) store->DiscardOrphan({1, index}, kDeadAttempt);
  EXPECT_FALSE(store->Contains({1, 1}));
  EXPECT_FALSE(store->Contains({1, 2}));
  EXPECT_TRUE(store->Contains({1, 3})) << "a retry's result in another process";
  EXPECT_TRUE(store->Contains({1, 4})) << "a retry's result in the same process";
  EXPECT_TRUE(store->Contains({1, 5}));
  EXPECT_TRUE(store->Contains({1, 6}));
  EXPECT_EQ(store->Usage().in_memory, 4000u);
  store->Unpin({1, 5});
}

TEST_F(ObjectStoreTest, FreeAndDestructionRemoveEveryFile) {
  auto store = Open(2000);
  Write(*store, {1, 1}, 'a', 1000);
  Write(*store, {1, 2}, 'b', 1000);
  Write(*store, {1, 3}, 'c', 1000);  // spills one
  store->Free({1, 3});
  EXPECT_EQ(store->Usage().in_memory, 1000u);
  store.reset();
  EXPECT_TRUE(std::filesystem::is_empty(directory_ / "shm"));
  EXPECT_FALSE(std::filesystem::exists(directory_ / "spill"));
}

TEST_F(ObjectStoreTest, FreedLargeFilesAreRecycledAndGiveWayWhenRoomIsNeeded) {
  constexpr std::uint64_t kMiB = 1 << 20;
  auto store = Open(8 * kMiB);
  Write(*store, {1, 1}, 'a', 2 * kMiB);
  store->Free({1, 1});
  EXPECT_EQ(store->Usage().in_memory, 0u);
  EXPECT_EQ(store->Usage().recycled, 2 * kMiB);
  Write(*store, {1, 2}, 'b', 2 * kMiB - 10);  // takes the recycled file
  EXPECT_EQ(store->Usage().recycled, 0u);
  EXPECT_EQ(FirstByte(*store, {1, 2}), 'b');
  EXPECT_EQ(std::filesystem::file_size(store->PathOf({1, 2})), 2 * kMiB - 10);
  store->Free({1, 2});
  // A full store drops recycled files before it spills anything.
  Write(*store, {1, 3}, 'c', 7 * kMiB);
  EXPECT_EQ(store->Usage().recycled, 0u);
  EXPECT_EQ(store->Usage().spilled, 0u);
}

TEST_F(ObjectStoreTest, RefusesACapacityLargerThanSharedMemory) {
  auto store = ObjectStore::Open({.shared_memory_directory = directory_ / "shm",
                                  .name_prefix = "p",
                                  .spill_directory = directory_ / "spill",
                                  .capacity = std::uint64_t{1} << 60,
                                  .node_id = 3,
                                  .on_spilled = {},
                                  .while_copying = {}});
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("object_store_memory"), std::string::npos);
}

}  // namespace
}  // namespace sray::object

namespace sray::object {
namespace {

TEST(MappedFile, AWritableMappingIsReusedWhenItsFileComesBackUnderANewName) {
  const auto directory =
      std::filesystem::temp_directory_path() / ("sray-mapping-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(directory);
  constexpr std::size_t kSize = 2 << 20;
  std::byte* first_address = nullptr;
  {
    auto file = MappedFile::Create(directory / "a", kSize);
    ASSERT_TRUE(file.ok()) << file.status().message();
    first_address = (*file)->data();
    std::memset((*file)->data(), 'a', kSize);
  }
  std::filesystem::rename(directory / "a", directory / "b");  // recycled by the store
  {
    auto file = MappedFile::Create(directory / "b", kSize);
    ASSERT_TRUE(file.ok()) << file.status().message();
    EXPECT_EQ((*file)->data(), first_address);
    std::memset((*file)->data(), 'b', kSize);
  }
  auto reader = MappedFile::OpenReadOnly(directory / "b");
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->view().front(), 'b');
  EXPECT_EQ((*reader)->view().back(), 'b');
  std::filesystem::remove_all(directory);
}

}  // namespace
}  // namespace sray::object

namespace sray::object {
namespace {

constexpr std::uint64_t kGiB = std::uint64_t{1} << 30;

TEST(StoreCapacity, DefaultsToAShareOfDevShmDividedAmongTheNodesHere) {
  auto capacity = StoreCapacity(std::nullopt, 12 * kGiB, 3);
  ASSERT_TRUE(capacity.ok());
  EXPECT_EQ(*capacity, static_cast<std::uint64_t>(12.0 * kGiB * kDefaultStoreFraction / 3));
}

TEST(StoreCapacity, AConfiguredSizeThatFitsIsKept) {
  auto capacity = StoreCapacity(512 * (std::uint64_t{1} << 20), 12 * kGiB, 3);
  ASSERT_TRUE(capacity.ok());
  EXPECT_EQ(*capacity, 512 * (std::uint64_t{1} << 20));
}

// A seal that arrives late from a dead attempt (still in flight when its
// retry created the object again) must not make the retry's file, not yet
// written, readable; the retry's own seal does.
TEST_F(ObjectStoreTest, ASealOfAnotherAttemptLeavesTheObjectUnreadable) {
  constexpr ObjectMaker kDeadAttempt{.rank = 7, .incarnation = 1};
  constexpr ObjectMaker kRetry{.rank = 7, .incarnation = 2};
  auto store = Open(10000);
  ASSERT_TRUE(store->Create({1, 1}, 1000, true, kRetry).ok());
  const Status late = store->SealMadeBy({1, 1}, kDeadAttempt);
  EXPECT_EQ(late.code(), StatusCode::kNotFound) << late.message();
  EXPECT_FALSE(store->Contains({1, 1}));
  EXPECT_FALSE(store->Locate({1, 1}).ok());
  EXPECT_TRUE(store->SealMadeBy({1, 1}, kRetry).ok());
  EXPECT_TRUE(store->Contains({1, 1}));
  EXPECT_TRUE(store->SealMadeBy({1, 1}, kRetry).ok()) << "sealing twice is harmless";
  EXPECT_EQ(store->SealMadeBy({1, 2}, kRetry).code(), StatusCode::kNotFound) << "no such object";
}

// A pull finds its source and pins it in one step: an object found but not
// yet pinned could be spilled (its file moved to disk) before the pull opens it.
TEST_F(ObjectStoreTest, AnObjectLocatedAndPinnedIsNotSpilledToMakeRoom) {
  auto store = Open(2000);
  Write(*store, {1, 1}, 'a', 1000);
  Write(*store, {1, 2}, 'b', 1000);
  store->Pin({1, 2});
  auto path = store->LocateAndPin({1, 1});
  ASSERT_TRUE(path.ok()) << path.status().message();
  EXPECT_EQ(store->Create({1, 3}, 1000, true).status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(std::filesystem::exists(*path)) << "the pinned object was spilled";
  EXPECT_EQ(FirstByte(*store, {1, 1}), 'a');
  store->Unpin({1, 1});
  store->Unpin({1, 2});
  Write(*store, {1, 3}, 'c', 1000);  // unpinned, it may go to disk again
  EXPECT_EQ(store->Usage().spilled, 1000u);
  EXPECT_FALSE(store->LocateAndPin({9, 9}).ok());
}

// A pull may be reading a pinned object's file (a peer on the same host maps
// it): freed then, the file is deleted, not recycled, so no later object
// shrinks or overwrites it under the reader.
TEST_F(ObjectStoreTest, APinnedObjectFreedIsDeletedNotRecycled) {
  constexpr std::uint64_t kMiB = 1 << 20;
  auto store = Open(8 * kMiB);
  Write(*store, {1, 1}, 'a', 2 * kMiB);
  auto pinned = store->LocateAndPin({1, 1});
  ASSERT_TRUE(pinned.ok()) << pinned.status().message();
  store->Free({1, 1});
  EXPECT_EQ(store->Usage().recycled, 0u);
  EXPECT_FALSE(std::filesystem::exists(*pinned));
  Write(*store, {1, 2}, 'b', kMiB);
  EXPECT_EQ(FirstByte(*store, {1, 2}), 'b');
}

// An ended owner's objects go, wherever they are (in memory, on disk, still
// being written, copies); their files are removed, not kept for reuse: a
// task may still map one as its argument.
TEST_F(ObjectStoreTest, AnEndedOwnersObjectsAreFreedAndTheirFilesNotRecycled) {
  constexpr std::uint64_t kSize = std::uint64_t{1} << 20;  // recycled when freed by id
  auto store = Open(3 * kSize);
  Write(*store, {7, 1}, 'a', kSize);
  Write(*store, {7, 2}, 'b', kSize);
  Write(*store, {8, 1}, 'c', kSize);
  Write(*store, {7, 3}, 'd', kSize);  // {7, 1} goes to disk
  ASSERT_EQ(store->Usage().spilled, kSize);
  ASSERT_TRUE(store->Create({7, 4}, 1000, false).ok());  // a copy, being written
  EXPECT_EQ(store->FreeOwnedBy([](std::uint64_t owner) { return owner == 7; }).size(), 4u);
  EXPECT_TRUE(store->Contains({8, 1}));
  const auto usage = store->Usage();
  EXPECT_EQ(usage.objects, 1u);
  EXPECT_EQ(usage.spilled, 0u);
  EXPECT_EQ(usage.in_memory, kSize);
  EXPECT_EQ(usage.recycled, 0u);
}

TEST(StoreCapacity, AConfiguredSizeBeyondDevShmFailsNamingSizesAndFix) {
  auto capacity = StoreCapacity(5 * kGiB, 12 * kGiB, 3);
  ASSERT_FALSE(capacity.ok());
  const std::string& message = capacity.status().message();
  for (const std::string part : {"object_store_memory=5120 MiB", "12288 MiB", "3 nodes",
                                 "lower object_store_memory", "--shm-size"}) {
    EXPECT_NE(message.find(part), std::string::npos) << message;
  }
}

TEST(StoreCapacity, ATinyDevShmFailsInsteadOfMakingAUselessStore) {
  // Docker's default /dev/shm is 64 MiB.
  auto capacity = StoreCapacity(std::nullopt, 64 * (std::uint64_t{1} << 20), 3);
  ASSERT_FALSE(capacity.ok());
  EXPECT_NE(capacity.status().message().find("/dev/shm holds only 64 MiB"), std::string::npos)
      << capacity.status().message();
  EXPECT_FALSE(StoreCapacity(std::uint64_t{1} << 20, 12 * kGiB, 1).ok());
}

TEST(StoreCapacity, ReadsTheSizeOfTheFileSystemItIsGiven) {
  auto capacity = StoreCapacityHere("/dev/shm", std::nullopt, 1);
  ASSERT_TRUE(capacity.ok()) << capacity.status().message();
  EXPECT_GT(*capacity, 0U);
  EXPECT_FALSE(StoreCapacityHere("/nonexistent-sray", std::nullopt, 1).ok());
}

}  // namespace
}  // namespace sray::object
