#pragma once

// UCX 1.13's shared-memory receive FIFO, byte by byte, as
// shared_memory_fifos.cc reads and repairs it and its tests lay one out by
// hand. Not a public UCX interface: RepairableFifoLayouts() turns the repair
// off for any other UCX version.
//
// Thread-safety: constants only.

#include <cstddef>
#include <cstdint>

namespace sray::transport::ucx_fifo {

// The control block (uct_mm_fifo_ctl_t, packed, cache-line aligned): the head
// in the first cache line with the signal socket's address, the tail and the
// owner's pid in the second.
constexpr std::size_t kHeadOffset = 0;
constexpr std::size_t kSignalAddressLengthOffset = 8;
constexpr std::size_t kSignalAddressOffset = 12;
constexpr std::size_t kTailOffset = 128;
constexpr std::size_t kOwnerPidOffset = 136;
constexpr std::size_t kControlSize = 192;  // UCT_MM_FIFO_CTL_SIZE
constexpr std::size_t kCacheLine = 64;
// Set in the head while the receiver sleeps until a sender signals it.
constexpr std::uint64_t kHeadArmedBit = std::uint64_t{1} << 63;

// A slot (uct_mm_fifo_element_t, packed): flags, UCT active-message id,
// length, the receive descriptor (segment id, segment size, offset, and its
// address in the receiver), then the inline data.
constexpr std::size_t kSlotFlagsOffset = 0;
constexpr std::size_t kSlotMessageIdOffset = 1;
constexpr std::size_t kSlotLengthOffset = 2;
constexpr std::size_t kSlotDescriptorSizeOffset = 12;
constexpr std::size_t kSlotDescriptorAddressOffset = 20;
constexpr std::size_t kSlotDataOffset = 28;
constexpr std::uint8_t kSlotOwnerFlag = 1;   // flips every lap: "written in this lap"
constexpr std::uint8_t kSlotInlineFlag = 2;  // the data is in the slot

}  // namespace sray::transport::ucx_fifo
