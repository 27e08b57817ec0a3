// Objects between two nodes' stores, with the transport replaced by direct
// calls between two ObjectTransfers in this process (RMA reads become
// copies from the holder's mapping, which is in this process too).

#include "core/object_transfer.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace sray::core {
namespace {

class TwoNodes : public ::testing::Test, public TransferLinks {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() /
                 ("sray-transfer-test-" + std::to_string(::getpid()));
    for (std::uint32_t node = 0; node < 2; ++node) {
      std::filesystem::create_directories(directory_ / "shm");
      auto store = object::ObjectStore::Open(
          {.shared_memory_directory = directory_ / "shm",
           .name_prefix =
               "sray.transfer." + std::to_string(::getpid()) + ".n" + std::to_string(node),
           .spill_directory = directory_ / ("spill" + std::to_string(node)),
           .capacity = 1 << 20,
           .node_id = node,
           .on_spilled = {},
           .while_copying = {}});
      ASSERT_TRUE(store.ok()) << store.status().message();
      stores_.push_back(std::move(store).value());
    }
    for (std::uint32_t node = 0; node < 2; ++node) {
      transfers_.push_back(std::make_unique<ObjectTransfer>(node, *stores_[node], *this));
    }
  }
  void TearDown() override {
    transfers_.clear();
    stores_.clear();
    std::filesystem::remove_all(directory_);
  }

  // TransferLinks, as node 1 (the puller) sees node 0.
  Result<Registration> Register(void* /*address*/, std::size_t /*length*/,
                                const std::filesystem::path& /*file*/) override {
    ++registrations_;
    return Registration{.handle = std::make_shared<int>(0), .packed_key = "key"};
  }
  Result<PullSource> Pin(std::uint32_t holder_node, const ObjectRequest& request) override {
    ++pins_;
    if (pin_times_out_) {
      // The holder pins, but the answer comes too late for the puller.
      (void)transfers_[holder_node]->PinForPull(request.id, request.puller_node, request.pull);
      return Status::Unavailable("no reply from node 0 within 60000 ms (test)");
    }
    return transfers_[holder_node]->PinForPull(request.id, request.puller_node, request.pull);
  }
  void Unpin(std::uint32_t holder_node, const ObjectRequest& request) override {
    transfers_[holder_node]->UnpinForPull(request.id, request.puller_node, request.pull);
  }
  Status Pull(std::uint32_t /*holder_node*/, const PullSource& source, void* destination,
              std::shared_ptr<void> /*destination_owner*/) override {
    if (during_pull_) during_pull_();
    if (fail_pulls_) return Status::Unavailable("node 0 is unreachable (test)");
    // The holder's mapping is in this process: its address is a pointer here.
    std::memcpy(destination,
                reinterpret_cast<const void*>(source.address),  // NOLINT(performance-no-int-to-ptr)
                source.size);
    return Status::Ok();
  }
  void FreeCopy(std::uint32_t node, const ObjectId& id) override {
    freed_copies_.push_back(node);
    transfers_[node]->FreeLocal(id);
  }

  void Write(std::uint32_t node, const ObjectId& id, const std::string& text) {
    auto path = stores_[node]->Create(id, text.size(), true);
    ASSERT_TRUE(path.ok()) << path.status().message();
    auto file = object::MappedFile::Create(*path, text.size());
    ASSERT_TRUE(file.ok()) << file.status().message();
    std::memcpy((*file)->data(), text.data(), text.size());
    stores_[node]->Seal(id);
  }

  static std::string Read(const std::string& path) {
    auto file = object::MappedFile::OpenReadOnly(path);
    EXPECT_TRUE(file.ok()) << file.status().message();
    return std::string((*file)->view());
  }

  std::filesystem::path directory_;
  std::vector<std::unique_ptr<object::ObjectStore>> stores_;
  std::vector<std::unique_ptr<ObjectTransfer>> transfers_;
  int registrations_ = 0;
  int pins_ = 0;
  bool fail_pulls_ = false;
  bool pin_times_out_ = false;
  std::function<void()> during_pull_;  // runs inside each Pull
  std::vector<std::uint32_t> freed_copies_;
};

TEST_F(TwoNodes, APulledCopyHasTheBytesAndIsPulledOnce) {
  const ObjectId id{7, 1};
  Write(0, id, std::string(5000, 'x'));
  auto path = transfers_[1]->MakeLocal(id, 0, 5000);
  ASSERT_TRUE(path.ok()) << path.status().message();
  EXPECT_EQ(Read(*path), std::string(5000, 'x'));
  EXPECT_EQ(transfers_[0]->pinned_objects(), 0u) << "the holder's pin outlived the pull";
  auto again = transfers_[1]->MakeLocal(id, 0, 5000);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *path);
  EXPECT_EQ(pins_, 1) << "a second MakeLocal pulled again";
  EXPECT_EQ(registrations_, 1);
}

TEST_F(TwoNodes, FreeingTheOriginalFreesThePulledCopies) {
  const ObjectId id{7, 2};
  Write(0, id, "hello");
  ASSERT_TRUE(transfers_[1]->MakeLocal(id, 0, 5).ok());
  ASSERT_TRUE(stores_[1]->Contains(id));
  transfers_[0]->FreeLocal(id);
  EXPECT_EQ(freed_copies_, (std::vector<std::uint32_t>{1}));
  EXPECT_FALSE(stores_[0]->Contains(id));
  EXPECT_FALSE(stores_[1]->Contains(id));
}

TEST_F(TwoNodes, AFailedPullLeavesNoCopyAndNoPin) {
  const ObjectId id{7, 3};
  Write(0, id, "payload");
  fail_pulls_ = true;
  auto path = transfers_[1]->MakeLocal(id, 0, 7);
  ASSERT_FALSE(path.ok());
  EXPECT_NE(path.status().message().find("cannot pull object"), std::string::npos)
      << path.status().message();
  EXPECT_FALSE(stores_[1]->Contains(id));
  EXPECT_EQ(transfers_[0]->pinned_objects(), 0u);
  fail_pulls_ = false;
  EXPECT_TRUE(transfers_[1]->MakeLocal(id, 0, 7).ok()) << "a later pull must work";
}

// Before: the pull sealed or aborted whatever entry had the id, so an
// object recomputed on the puller's node while the pull ran was made
// readable unwritten (pull succeeded) or deleted (pull failed).
TEST_F(TwoNodes, APullNeverSealsOrAbortsARecomputationThatReplacedItsCopy) {
  const ObjectId id{7, 6};
  Write(0, id, "original");
  const object::ObjectMaker retry{.rank = 5, .incarnation = 0};
  during_pull_ = [&] { ASSERT_TRUE(stores_[1]->Create(id, 8, true, retry).ok()); };
  auto pulled = transfers_[1]->MakeLocal(id, 0, 8);
  ASSERT_FALSE(pulled.ok()) << "the recomputation's unwritten file was handed out";
  EXPECT_NE(pulled.status().message().find("being recomputed"), std::string::npos)
      << pulled.status().message();
  EXPECT_FALSE(stores_[1]->Contains(id)) << "the unwritten primary was sealed";
  EXPECT_TRUE(stores_[1]->SealMadeBy(id, retry).ok());

  const ObjectId other{7, 7};
  Write(0, other, "original");
  fail_pulls_ = true;
  during_pull_ = [&] { ASSERT_TRUE(stores_[1]->Create(other, 8, true, retry).ok()); };
  ASSERT_FALSE(transfers_[1]->MakeLocal(other, 0, 8).ok());
  EXPECT_TRUE(stores_[1]->SealMadeBy(other, retry).ok())
      << "the failed pull aborted the retry's entry";
  EXPECT_EQ(transfers_[0]->pinned_objects(), 0u);
}

TEST_F(TwoNodes, PinsAreCountedUntilTheLastPullEnds) {
  const ObjectId id{7, 4};
  Write(0, id, "shared");
  ASSERT_TRUE(transfers_[0]->PinForPull(id, 1, 1).ok());
  ASSERT_TRUE(transfers_[0]->PinForPull(id, 2, 1).ok());
  EXPECT_EQ(registrations_, 1) << "each pull registered the memory again";
  transfers_[0]->UnpinForPull(id, 1, 1);
  EXPECT_EQ(transfers_[0]->pinned_objects(), 1u);
  transfers_[0]->UnpinForPull(id, 1, 1);  // twice: still node 2's pin
  EXPECT_EQ(transfers_[0]->pinned_objects(), 1u);
  transfers_[0]->UnpinForPull(id, 2, 1);
  EXPECT_EQ(transfers_[0]->pinned_objects(), 0u);
}

// Before: a pin answered after the puller gave up (its holder busy for
// longer than the call's timeout), or a pin of a node lost before it
// unpinned, stayed for good: the object could never be spilled again.
TEST_F(TwoNodes, APinGivenUpOnOrOfALostNodeIsReleased) {
  const ObjectId id{7, 5};
  Write(0, id, "payload");
  pin_times_out_ = true;
  ASSERT_FALSE(transfers_[1]->MakeLocal(id, 0, 7).ok());
  EXPECT_EQ(transfers_[0]->pinned_objects(), 0u) << "the late pin stayed";
  // The unpin may also come before the pin: the pin is then refused.
  transfers_[0]->UnpinForPull(id, 1, 99);
  EXPECT_FALSE(transfers_[0]->PinForPull(id, 1, 99).ok());
  EXPECT_EQ(transfers_[0]->pinned_objects(), 0u);
  pin_times_out_ = false;
  EXPECT_TRUE(transfers_[1]->MakeLocal(id, 0, 7).ok()) << "a later pull must work";

  ASSERT_TRUE(transfers_[0]->PinForPull(id, 2, 1).ok());  // node 2 pins, then is lost
  ASSERT_TRUE(transfers_[0]->PinForPull(id, 3, 1).ok());
  transfers_[0]->ForgetPuller(2);
  EXPECT_EQ(transfers_[0]->pinned_objects(), 1u) << "node 3's pin must stay";
  transfers_[0]->ForgetPuller(3);
  EXPECT_EQ(transfers_[0]->pinned_objects(), 0u);
}

TEST_F(TwoNodes, AMissingObjectIsAnErrorNamingIt) {
  auto path = transfers_[1]->MakeLocal(ObjectId{7, 99}, 0, 10);
  ASSERT_FALSE(path.ok());
  EXPECT_NE(path.status().message().find("cannot reach object"), std::string::npos)
      << path.status().message();
}

}  // namespace
}  // namespace sray::core
