// A sender killed between taking a slot of a shared-memory receive FIFO and
// flagging it: first on a FIFO laid out by hand, then on real UCX workers,
// where a forked child takes a slot of the receiver's FIFO and exits.

#include "transport/shared_memory_fifos.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <unistd.h>
#include <csignal>

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "transport/transport.h"
#include "transport/ucx_fifo_layout.h"
#include "transport/ucx_handles.h"

namespace sray::transport {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

using namespace ucx_fifo;  // the FIFO's offsets and flags, used throughout
constexpr std::byte kInline{kSlotInlineFlag};
constexpr std::byte kOwner{kSlotOwnerFlag};
constexpr FifoLayout kLayout{.slots = 64, .slot_size = 128};

StalledSlotRepair::Settings Limit(milliseconds stall_limit,
                                  milliseconds longest_gap = milliseconds(1000)) {
  StalledSlotRepair::Settings settings;
  settings.stall_limit = stall_limit;
  settings.longest_gap = longest_gap;
  settings.skipped_slot_message_id = 8;
  settings.writer_may_be_paused = [](const std::string&) { return false; };
  return settings;
}

// A FIFO of this process laid out as UCX lays out one, in a shared mapping
// of the size UCX allocates: every slot has a receive descriptor and is
// flagged for the lap before the first, as UCX starts them.
class HandMadeFifo {
 public:
  HandMadeFifo() {
    void* memory =
        mmap(nullptr, kLength, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(memory, MAP_FAILED);
    control_ = static_cast<std::byte*>(memory);
    const pid_t pid = getpid();
    std::memcpy(control_ + kOwnerPidOffset, &pid, sizeof(pid));
    const socklen_t length = sizeof(sa_family_t) + 6;
    std::memcpy(control_ + kSignalAddressLengthOffset, &length, sizeof(length));
    const sa_family_t family = AF_UNIX;
    std::memcpy(control_ + kSignalAddressOffset, &family, sizeof(family));
    for (std::uint64_t slot = 0; slot < kLayout.slots; ++slot) {
      Slot(slot)[0] = kOwner;
      const std::uint32_t descriptor_size = 8192;
      std::memcpy(Slot(slot) + kSlotDescriptorSizeOffset, &descriptor_size, 4);
      const std::uint64_t descriptor_address = 0x7f0000000000 + slot * 8192;
      std::memcpy(Slot(slot) + kSlotDescriptorAddressOffset, &descriptor_address, 8);
    }
  }
  ~HandMadeFifo() { munmap(control_, kLength); }
  HandMadeFifo(const HandMadeFifo&) = delete;
  HandMadeFifo& operator=(const HandMadeFifo&) = delete;

  FifoMapping Mapping() const {
    return {.address = control_, .length = kLength, .identity = "00:00 1", .posix = true};
  }
  std::byte* Control() { return control_; }
  std::byte* Slot(std::uint64_t sequence) {
    return control_ + kControlSize + (sequence % kLayout.slots) * kLayout.slot_size;
  }
  void SetHead(std::uint64_t head) { std::memcpy(control_ + kHeadOffset, &head, sizeof(head)); }
  void SetTail(std::uint64_t tail) { std::memcpy(control_ + kTailOffset, &tail, sizeof(tail)); }
  // What a sender does for slot `sequence`: write, then flag for its lap.
  void Write(std::uint64_t sequence) {
    Slot(sequence)[0] = kInline | ((sequence & kLayout.slots) != 0 ? kOwner : std::byte{0});
  }
  SharedMemoryFifo Open() {
    auto fifo = SharedMemoryFifo::Open(Mapping(), kLayout);
    EXPECT_TRUE(fifo.has_value());
    return *fifo;
  }
  // Whether slot `sequence` holds the empty message for id 8, flagged for
  // its lap.
  bool HoldsSkipMessage(std::uint64_t sequence) {
    std::uint16_t length = 0;
    std::memcpy(&length, Slot(sequence) + kSlotLengthOffset, sizeof(length));
    const std::byte ucp_header[8] = {std::byte{8}};
    return Slot(sequence)[0] ==
               (kInline | ((sequence & kLayout.slots) != 0 ? kOwner : std::byte{0})) &&
           Slot(sequence)[kSlotMessageIdOffset] == std::byte{23} && length == 8 &&
           std::memcmp(Slot(sequence) + kSlotDataOffset, ucp_header, sizeof(ucp_header)) == 0;
  }

 private:
  // UCT_MM_GET_FIFO_SIZE for 64 slots of 128 bytes, in pages.
  static constexpr std::size_t kLength = 12288;
  std::byte* control_ = nullptr;
};

TEST(SharedMemoryFifo, AControlBlockOfAnotherProcessIsNotTakenForOurs) {
  HandMadeFifo fifo;
  const pid_t other = getpid() + 1;
  std::memcpy(fifo.Control() + kOwnerPidOffset, &other, sizeof(other));
  EXPECT_FALSE(SharedMemoryFifo::Open(fifo.Mapping(), kLayout).has_value());
}

TEST(SharedMemoryFifo, AnotherLayoutThanTheMappingsIsRefused) {
  HandMadeFifo fifo;
  // The same mapping size, another slot stride: the descriptors are not
  // where that stride puts them. (A multiple of UCX's stride would find
  // them: the layout itself comes from UCX's configuration.)
  EXPECT_FALSE(SharedMemoryFifo::Open(fifo.Mapping(), {.slots = 32, .slot_size = 300}));
  // Another size than the mapping's.
  EXPECT_FALSE(SharedMemoryFifo::Open(fifo.Mapping(), {.slots = 128, .slot_size = 128}));
  EXPECT_TRUE(SharedMemoryFifo::Open(fifo.Mapping(), kLayout));
}

TEST(SharedMemoryFifo, AnUnmappedAddressIsRefusedNotACrash) {
  HandMadeFifo fifo;
  FifoMapping mapping = fifo.Mapping();
  void* gone = mmap(nullptr, mapping.length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_EQ(munmap(gone, mapping.length), 0);
  mapping.address = gone;
  EXPECT_FALSE(SharedMemoryFifo::Open(mapping, kLayout).has_value());
}

TEST(SharedMemoryFifo, HeadAndTailThatMakeNoSenseAreNotScanned) {
  HandMadeFifo fifo;
  fifo.SetHead(3);
  fifo.SetTail(5);
  EXPECT_EQ(fifo.Open().FirstUnflaggedSlot(), std::nullopt);
  fifo.SetHead(100);
  fifo.SetTail(5);  // more slots taken than the FIFO has
  EXPECT_EQ(fifo.Open().FirstUnflaggedSlot(), std::nullopt);
}

TEST(SharedMemoryFifo, FindsTheFirstTakenSlotNotYetFlaggedAcrossLaps) {
  HandMadeFifo fifo;
  // Slots 0..69 taken (the second lap began at 64); all written but 66.
  for (std::uint64_t sequence = 0; sequence < 70; ++sequence) {
    if (sequence != 66) fifo.Write(sequence);
  }
  fifo.SetTail(32);
  fifo.SetHead(70 | kHeadArmedBit);
  EXPECT_EQ(fifo.Open().FirstUnflaggedSlot(), 66u);
  fifo.Write(66);
  EXPECT_EQ(fifo.Open().FirstUnflaggedSlot(), std::nullopt);
}

TEST(StalledSlotRepair, ASlotLeftUnflaggedPastTheLimitIsFilledWithAnEmptyMessage) {
  HandMadeFifo fifo;
  fifo.Write(0);
  fifo.SetHead(3);  // slot 1 taken by a sender that died; slot 2 written behind it
  fifo.Write(2);
  std::vector<std::uint64_t> filled;
  StalledSlotRepair::Settings settings = Limit(milliseconds(500));
  settings.on_fill = [&](const SharedMemoryFifo&, std::uint64_t sequence) {
    filled.push_back(sequence);
  };
  StalledSlotRepair repair({fifo.Open()}, settings);
  const auto start = Clock::now();
  for (int check = 0; check <= 4; ++check) {
    EXPECT_EQ(repair.Check(start + milliseconds(100 * check)), 0u);
  }
  EXPECT_EQ(repair.Check(start + milliseconds(500)), 1u);
  EXPECT_EQ(filled, std::vector<std::uint64_t>{1});
  EXPECT_TRUE(fifo.HoldsSkipMessage(1));
  EXPECT_EQ(fifo.Open().FirstUnflaggedSlot(), std::nullopt);
}

TEST(StalledSlotRepair, ASlotOfTheSecondLapIsFlaggedForThatLap) {
  HandMadeFifo fifo;
  for (std::uint64_t sequence = 0; sequence < 64; ++sequence) fifo.Write(sequence);
  fifo.SetTail(64);
  fifo.SetHead(66);  // slot 64 (index 0, second lap) taken and never written
  fifo.Write(65);
  StalledSlotRepair repair({fifo.Open()}, Limit(milliseconds(500)));
  const auto start = Clock::now();
  EXPECT_EQ(repair.Check(start), 0u);
  EXPECT_EQ(repair.Check(start + milliseconds(250)), 0u);
  EXPECT_EQ(repair.Check(start + milliseconds(500)), 1u);
  EXPECT_TRUE(fifo.HoldsSkipMessage(64));
  EXPECT_EQ(fifo.Open().FirstUnflaggedSlot(), std::nullopt);
}

TEST(StalledSlotRepair, ASlowSenderThatFlagsItsSlotInTimeIsLeftAlone) {
  HandMadeFifo fifo;
  fifo.SetHead(1);
  StalledSlotRepair repair({fifo.Open()}, Limit(milliseconds(500)));
  const auto start = Clock::now();
  EXPECT_EQ(repair.Check(start), 0u);
  EXPECT_EQ(repair.Check(start + milliseconds(400)), 0u);
  fifo.Write(0);
  EXPECT_EQ(repair.Check(start + milliseconds(800)), 0u);
  EXPECT_FALSE(fifo.HoldsSkipMessage(0));
}

TEST(StalledSlotRepair, AGapBetweenChecksRestartsTheCount) {
  // This process was stopped (a frozen node): its sender may have been
  // stopped mid-write too and must get the whole limit after the resume.
  HandMadeFifo fifo;
  fifo.SetHead(1);
  StalledSlotRepair repair({fifo.Open()}, Limit(milliseconds(500), milliseconds(300)));
  const auto start = Clock::now();
  EXPECT_EQ(repair.Check(start), 0u);
  EXPECT_EQ(repair.Check(start + milliseconds(5000)), 0u);
  EXPECT_EQ(repair.Check(start + milliseconds(5250)), 0u);
  EXPECT_EQ(repair.Check(start + milliseconds(5500)), 1u);
}

TEST(StalledSlotRepair, ASlotIsLeftWhileAProcessThatMapsTheFifoIsPaused) {
  HandMadeFifo fifo;
  fifo.SetHead(1);
  bool paused = true;
  std::vector<std::string> asked;
  StalledSlotRepair::Settings settings = Limit(milliseconds(500));
  settings.writer_may_be_paused = [&](const std::string& identity) {
    asked.push_back(identity);
    return paused;
  };
  StalledSlotRepair repair({fifo.Open()}, settings);
  const auto start = Clock::now();
  for (int check = 0; check <= 8; ++check) {
    EXPECT_EQ(repair.Check(start + milliseconds(250 * check)), 0u);
  }
  // Asked at 500, 1000, 1500 and 2000 ms: once per whole limit.
  EXPECT_EQ(asked, std::vector<std::string>(4, "00:00 1"));
  paused = false;  // it ended (or resumed) without writing: a whole limit more
  EXPECT_EQ(repair.Check(start + milliseconds(2250)), 0u);
  EXPECT_EQ(repair.Check(start + milliseconds(2500)), 1u);
}

// ---- real UCX workers -------------------------------------------------------

constexpr std::uint32_t kNote = 1;

class Notes {
 public:
  explicit Notes(Transport& transport) {
    transport.RegisterOneWayHandler(kNote,
                                    [state = state_](std::uint32_t, std::span<const std::byte>) {
                                      std::lock_guard lock(state->mutex);
                                      ++state->count;
                                      state->changed.notify_all();
                                    });
  }
  bool WaitFor(int count, milliseconds limit) {
    std::unique_lock lock(state_->mutex);
    return state_->changed.wait_for(lock, limit, [&] { return state_->count >= count; });
  }

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable changed;
    int count = 0;
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

class KilledSender : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!RepairableFifoLayouts()) GTEST_SKIP() << "repair is off with this UCX";
  }
  void TearDown() override {
    if (stopped_child_ > 0) {
      kill(stopped_child_, SIGKILL);
      waitpid(stopped_child_, nullptr, 0);
    }
  }

  std::unique_ptr<Transport> Make(std::uint32_t rank, milliseconds stalled_slot_limit,
                                  std::shared_ptr<UcxWorker> worker) {
    TransportOptions options;
    options.rank = rank;
    options.stalled_slot_limit = stalled_slot_limit;
    options.resolve_address = [this](std::uint32_t peer) -> Result<Bytes> {
      std::lock_guard lock(mutex_);
      return addresses_.at(peer);
    };
    auto transport = Transport::Create(std::move(options), std::move(worker));
    EXPECT_TRUE(transport.ok()) << transport.status().message();
    std::lock_guard lock(mutex_);
    addresses_[rank] = *(*transport)->LocalAddress(false);
    return std::move(transport).value();
  }

  static std::shared_ptr<UcxWorker> NewWorker() {
    auto context = UcxContext::Create("1s");
    EXPECT_TRUE(context.ok());
    auto worker = UcxWorker::Create(*context);
    EXPECT_TRUE(worker.ok());
    return *worker;
  }

  // A receiver (rank 0, repairing after `stalled_slot_limit`; zero: never)
  // that got a first note from a sender (rank 1) over shared memory.
  void Connect(milliseconds stalled_slot_limit) {
    receiver_worker_ = NewWorker();
    receiver_ = Make(0, stalled_slot_limit, receiver_worker_);
    sender_ = Make(1, milliseconds(300), NewWorker());
    notes_ = std::make_unique<Notes>(*receiver_);
    SendNote();
    ASSERT_TRUE(notes_->WaitFor(1, milliseconds(10000)));
  }
  void SendNote() { ASSERT_TRUE(sender_->Send(0, kNote, {}).ok()); }

  // Where this process maps the FIFOs of `worker`.
  static std::vector<std::uint64_t*> Heads(const UcxWorker& worker) {
    std::vector<std::uint64_t*> heads;
    for (const SharedMemoryFifo& fifo : worker.receive_fifos()) {
      for (const FifoMapping& mapping : FindSharedMemoryMappings()) {
        if (mapping.identity == fifo.identity()) {
          heads.push_back(static_cast<std::uint64_t*>(mapping.address));
          break;
        }
      }
    }
    EXPECT_EQ(heads.size(), worker.receive_fifos().size());
    return heads;
  }

  // A child takes the next slot of every receive FIFO of `worker`, as a
  // sender does, and then exits, or stops itself (`stop`) before it would
  // write the slot.
  void TakeASlot(const UcxWorker& worker, bool stop) {
    const std::vector<std::uint64_t*> heads = Heads(worker);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      for (std::uint64_t* head : heads) __atomic_fetch_add(head, 1, __ATOMIC_SEQ_CST);
      if (stop) raise(SIGSTOP);
      _exit(0);
    }
    int status = 0;
    ASSERT_EQ(waitpid(child, &status, stop ? WUNTRACED : 0), child);
    if (stop) {
      ASSERT_TRUE(WIFSTOPPED(status));
      stopped_child_ = child;
    } else {
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
  }

  std::mutex mutex_;
  std::map<std::uint32_t, Bytes> addresses_;
  pid_t stopped_child_ = -1;
  std::shared_ptr<UcxWorker> receiver_worker_;
  std::unique_ptr<Transport> receiver_;
  std::unique_ptr<Transport> sender_;
  std::unique_ptr<Notes> notes_;
};

TEST_F(KilledSender, EachWorkerFindsItsOwnReceiveFifos) {
  auto first = NewWorker();
  auto second = NewWorker();
  // One FIFO per mm transport (posix and sysv), each its own.
  ASSERT_EQ(first->receive_fifos().size(), 2u);
  ASSERT_EQ(second->receive_fifos().size(), 2u);
  for (const SharedMemoryFifo& mine : first->receive_fifos()) {
    for (const SharedMemoryFifo& theirs : second->receive_fifos()) {
      EXPECT_NE(mine.identity(), theirs.identity());
    }
  }
}

TEST_F(KilledSender, FifosOfAnotherConfiguredSizeAreFoundByThatSize) {
  // UCX reads its FIFO settings once per process: this test runs itself in
  // a child with the posix transport's FIFO at 32 slots (sysv's stays at
  // 64), which prints how many receive FIFOs its worker found.
  if (std::getenv("SRAY_TEST_REPORT_FIFOS") != nullptr) {
    std::printf("receive fifos: %zu\n", NewWorker()->receive_fifos().size());
    return;
  }
  const std::string command = "SRAY_TEST_REPORT_FIFOS=1 UCX_POSIX_FIFO_SIZE=32 /proc/" +
                              std::to_string(getpid()) +
                              "/exe --gtest_filter=KilledSender."
                              "FifosOfAnotherConfiguredSizeAreFoundByThatSize 2>&1";
  FILE* child = popen(command.c_str(), "r");
  ASSERT_NE(child, nullptr);
  std::string output;
  char buffer[4096];
  while (std::fgets(buffer, sizeof(buffer), child) != nullptr) output += buffer;
  ASSERT_EQ(pclose(child), 0) << output;
  // Read by the default layout, the 32-slot FIFO's mapping (8 KiB, not 12)
  // would be refused: one FIFO found, not two.
  EXPECT_NE(output.find("receive fifos: 2\n"), std::string::npos) << output;
}

TEST_F(KilledSender, WithoutRepairNothingArrivesOverSharedMemoryAgain) {
  // UCX's own behaviour, which the repair exists for.
  Connect(milliseconds(0));
  TakeASlot(*receiver_worker_, /*stop=*/false);
  SendNote();
  EXPECT_FALSE(notes_->WaitFor(2, milliseconds(3000)));
}

TEST_F(KilledSender, TheSlotItLeftIsSkippedAndLaterMessagesArrive) {
  Connect(milliseconds(300));
  TakeASlot(*receiver_worker_, /*stop=*/false);
  for (int note = 0; note < 3; ++note) SendNote();
  EXPECT_TRUE(notes_->WaitFor(4, milliseconds(10000)));
  // And again, in the same FIFOs.
  TakeASlot(*receiver_worker_, /*stop=*/false);
  SendNote();
  EXPECT_TRUE(notes_->WaitFor(5, milliseconds(10000)));
  // A slot filled in every FIFO each time; those of the FIFO in use arrived
  // as the empty message UCP hands to the transport's handler (UCP polls
  // the other transport's FIFO only once an endpoint uses it).
  const TransportStatistics statistics = receiver_->statistics();
  EXPECT_EQ(statistics.stalled_slots_skipped, 2 * receiver_worker_->receive_fifos().size());
  EXPECT_GE(statistics.skipped_slot_messages, 2u);
  EXPECT_LE(statistics.skipped_slot_messages, statistics.stalled_slots_skipped);
}

TEST_F(KilledSender, AStoppedSenderKeepsItsSlotUntilItDies) {
  Connect(milliseconds(300));
  // Stopped (a debugger, SIGSTOP) with its slot taken: it may write it yet.
  TakeASlot(*receiver_worker_, /*stop=*/true);
  SendNote();
  EXPECT_FALSE(notes_->WaitFor(2, milliseconds(2000)));
  EXPECT_EQ(receiver_->statistics().stalled_slots_skipped, 0u);
  // Killed: now the slot is skipped.
  kill(stopped_child_, SIGKILL);
  waitpid(stopped_child_, nullptr, 0);
  stopped_child_ = -1;
  EXPECT_TRUE(notes_->WaitFor(2, milliseconds(10000)));
}

}  // namespace
}  // namespace sray::transport
