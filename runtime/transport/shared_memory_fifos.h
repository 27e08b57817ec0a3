#pragma once

// Keeps one killed process from silencing another's shared-memory receive
// queue (docs/reliability.md, "A worker killed while it sent").
//
// Why: UCX's shared-memory transports (mm: posix, sysv) give each worker one
// receive FIFO per transport, which every sender on the host writes into. A
// sender takes a slot by raising the FIFO's head, copies its message in, and
// then flags the slot; the receiver reads slots strictly in order. A sender
// killed between the two (kill -9, the OOM killer) leaves a slot that is
// never flagged, and UCX 1.13 then waits on it for good: nothing any process
// sends this receiver over shared memory arrives again.
//
// What: a slot left unflagged for `stall_limit` is filled with a message of
// UCX's own active-message format (an empty message for
// `skipped_slot_message_id`, which the transport registers and ignores),
// then flagged as its sender would have. The messages behind it flow again;
// only the dead sender's own message is lost, as it would be anyway. A slot
// is only taken when no other process that maps the FIFO is stopped, traced
// or in uninterruptible sleep (a sender paused mid-write by a debugger, a
// frozen node or swapping, which would finish its write later into a slot
// that is no longer its own), and checks further apart than `longest_gap`
// restart the count (this process was stopped itself).
//
// This writes into UCX's memory by its 1.13 layout (uct/sm/mm/base/
// mm_iface.h: the FIFO control block and slots), which is not a public
// interface: it runs only with UCX 1.13 on 64-byte cache lines, with the
// FIFO settings UCX's own configuration gives (RepairableFifoLayouts), on
// mappings whose size and contents match that layout (SharedMemoryFifo::
// Open), and is off everywhere else.
//
// Thread-safety: the free functions may run on any thread (mappings are read
// with process_vm_readv, so one unmapped meanwhile is an error, not a
// crash). StalledSlotRepair is used by one thread at a time (the progress
// thread's housekeeping); its writes follow the FIFO's own protocol, so the
// threads that read the FIFO need no lock with it.

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace sray::transport {

// UCX's FIFO settings for one mm transport: slots per FIFO, bytes per slot.
struct FifoLayout {
  std::uint64_t slots = 0;
  std::size_t slot_size = 0;
};

// The layouts to repair with, as UCX's configuration (environment and
// ucx.conf) gives them; nothing when repair must stay off (a UCX other than
// 1.13, another architecture, or a setting UCX's API would not tell).
struct FifoLayouts {
  FifoLayout posix;
  FifoLayout sysv;
};
std::optional<FifoLayouts> RepairableFifoLayouts();

// A shared mapping of UCX's mm transports in this process. `identity` is the
// mapping's device and inode as /proc/PID/maps shows them ("00:1a 212908"),
// the same for every mapping of one segment in any process.
struct FifoMapping {
  void* address = nullptr;
  std::size_t length = 0;
  std::string identity;
  bool posix = false;  // else System V
};
// Every mm mapping of this process (none of its memory read). Empty when
// /proc/self/maps cannot be read.
std::vector<FifoMapping> FindSharedMemoryMappings();

// One receive FIFO of this process, by UCX 1.13's layout.
class SharedMemoryFifo {
 public:
  // Checks `mapping` against `layout`: its size, a control block naming
  // this process as the owner with a Unix signal socket, and a receive
  // descriptor in every slot. Nothing when it is not such a FIFO.
  static std::optional<SharedMemoryFifo> Open(const FifoMapping& mapping, const FifoLayout& layout);
  // The first slot, from the tail up to the head, that is taken but not
  // flagged; nothing when none is, or when head and tail make no sense.
  [[nodiscard]] std::optional<std::uint64_t> FirstUnflaggedSlot() const;
  // Fills slot `sequence` with an empty message for `message_id` and flags
  // it, unless its sender flagged it meanwhile. True if it did.
  bool FillAndFlag(std::uint64_t sequence, std::uint16_t message_id) const;
  [[nodiscard]] const std::string& identity() const { return identity_; }

 private:
  SharedMemoryFifo(std::byte* control, const FifoLayout& layout, std::string identity)
      : control_(control), layout_(layout), identity_(std::move(identity)) {}
  [[nodiscard]] std::byte* Slot(std::uint64_t sequence) const;
  [[nodiscard]] bool Flagged(std::uint64_t sequence) const;
  std::byte* control_;
  FifoLayout layout_;
  std::string identity_;
};

// True when a process other than this one maps the segment `identity` and
// is stopped (T), traced (t) or in uninterruptible sleep (D): one that may
// be in the middle of a write it will finish later. Reads /proc.
bool AnotherMapperIsPaused(const std::string& identity);

class StalledSlotRepair {
 public:
  struct Settings {
    std::chrono::milliseconds stall_limit{2000};
    // Checks further apart than this restart the count (see above).
    std::chrono::milliseconds longest_gap{1000};
    std::uint16_t skipped_slot_message_id = 0;
    // Whether a process that may still write the slot is paused; the slot
    // is then left for another stall_limit.
    std::function<bool(const std::string& identity)> writer_may_be_paused = AnotherMapperIsPaused;
    // Told of each slot filled (for a log line and a count).
    std::function<void(const SharedMemoryFifo& fifo, std::uint64_t sequence)> on_fill;
  };
  StalledSlotRepair(std::vector<SharedMemoryFifo> fifos, Settings settings);

  // Looks at every FIFO once; returns how many slots it filled.
  std::size_t Check(std::chrono::steady_clock::time_point now);

 private:
  struct Watch {
    SharedMemoryFifo fifo;
    std::optional<std::uint64_t> unflagged;
    std::chrono::steady_clock::time_point since{};
    std::chrono::steady_clock::time_point last_check{};
  };
  std::vector<Watch> watches_;
  Settings settings_;
};

}  // namespace sray::transport
