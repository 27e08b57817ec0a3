#include "transport/shared_memory_fifos.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <ucp/api/ucp.h>
#include <uct/api/uct.h>
#include <unistd.h>

#include <charconv>
#include <cstring>
#include <memory>
#include <string_view>

#include "common/process_stat.h"
#include "common/whole_file.h"
#include "transport/ucx_fifo_layout.h"

namespace sray::transport {
namespace {

using namespace ucx_fifo;  // the FIFO's offsets and flags, used throughout

// UCP_AM_ID_AM_SINGLE: a single-fragment user active message, whose data
// starts with UCP's header (ucp_am_hdr_t): the user id (16 bits), flags (16)
// and the user header's length (32).
constexpr std::uint8_t kUcpSingleMessageId = 23;
constexpr std::size_t kUcpHeaderSize = 8;

template <typename T>
T LoadAcquire(const std::byte* address) {
  T value;
  __atomic_load(reinterpret_cast<const T*>(address), &value, __ATOMIC_ACQUIRE);
  return value;
}

template <typename T>
T Field(const std::vector<std::byte>& bytes, std::size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(value));
  return value;
}

// This process's memory at `address`, or nothing if it is not mapped.
std::optional<std::vector<std::byte>> ReadOwnMemory(const void* address, std::size_t length) {
  std::vector<std::byte> bytes(length);
  iovec local{.iov_base = bytes.data(), .iov_len = length};
  iovec remote{.iov_base = const_cast<void*>(address), .iov_len = length};
  if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != static_cast<ssize_t>(length))
    return std::nullopt;
  return bytes;
}

// MM_FIFO_SIZE and MM_FIFO_ELEM_SIZE of UCX's `component` ("posix",
// "sysv"), read through UCT's configuration API as UCX itself reads them.
std::optional<FifoLayout> ReadLayout(const char* component_name) {
  uct_component_h* components = nullptr;
  unsigned count = 0;
  if (uct_query_components(&components, &count) != UCS_OK) return std::nullopt;
  std::unique_ptr<uct_component_h, decltype(&uct_release_component_list)> release(
      components, &uct_release_component_list);
  for (unsigned index = 0; index < count; ++index) {
    uct_component_attr_t attributes{};
    attributes.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME;
    if (uct_component_query(components[index], &attributes) != UCS_OK ||
        std::strcmp(attributes.name, component_name) != 0) {
      continue;
    }
    uct_md_config_t* md_config = nullptr;
    if (uct_md_config_read(components[index], nullptr, nullptr, &md_config) != UCS_OK)
      return std::nullopt;
    uct_md_h md = nullptr;
    const ucs_status_t opened = uct_md_open(components[index], component_name, md_config, &md);
    uct_config_release(md_config);
    if (opened != UCS_OK) return std::nullopt;
    std::unique_ptr<uct_md, decltype(&uct_md_close)> close(md, &uct_md_close);
    uct_iface_config_t* iface_config = nullptr;
    if (uct_md_iface_config_read(md, component_name, nullptr, nullptr, &iface_config) != UCS_OK)
      return std::nullopt;
    auto number = [iface_config](const char* name) -> std::optional<std::uint64_t> {
      char text[32] = {};
      if (uct_config_get(iface_config, name, text, sizeof(text)) != UCS_OK) return std::nullopt;
      std::uint64_t value = 0;
      const char* end = text + std::strlen(text);
      if (std::from_chars(text, end, value).ptr != end || value == 0) return std::nullopt;
      return value;
    };
    const std::optional<std::uint64_t> slots = number("MM_FIFO_SIZE");
    const std::optional<std::uint64_t> slot_size = number("MM_FIFO_ELEM_SIZE");
    uct_config_release(iface_config);
    if (!slots || !slot_size || (*slots & (*slots - 1)) != 0 ||
        *slot_size < kSlotDataOffset + kUcpHeaderSize) {
      return std::nullopt;
    }
    return FifoLayout{.slots = *slots, .slot_size = *slot_size};
  }
  return std::nullopt;
}

struct CloseDirectory {
  void operator()(DIR* directory) const { closedir(directory); }
};
using Directory = std::unique_ptr<DIR, CloseDirectory>;

std::size_t PageRounded(std::size_t length) {
  const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return (length + page - 1) / page * page;
}

// The state letters of /proc/PID/task/*/stat: is any thread paused?
bool AnyThreadPaused(const std::string& process_directory) {
  const Directory tasks(opendir((process_directory + "/task").c_str()));
  if (!tasks) return false;
  while (const dirent* task = readdir(tasks.get())) {
    if (task->d_name[0] < '0' || task->d_name[0] > '9') continue;
    const std::optional<ProcessStat> stat =
        ReadProcessStat(process_directory + "/task/" + task->d_name + "/stat");
    if (stat && IsPausedState(stat->state)) return true;
  }
  return false;
}

bool MapsSegment(const std::string& process_directory, const std::string& identity) {
  const std::optional<std::string> maps = ReadWholeFile(process_directory + "/maps");
  return maps && maps->find(" " + identity + " ") != std::string::npos;
}

}  // namespace

std::optional<FifoLayouts> RepairableFifoLayouts() {
#if defined(__x86_64__) || defined(__aarch64__)
  static const std::optional<FifoLayouts> layouts = []() -> std::optional<FifoLayouts> {
    unsigned major = 0;
    unsigned minor = 0;
    unsigned release = 0;
    ucp_get_version(&major, &minor, &release);
    if (major != 1 || minor != 13) return std::nullopt;
    const std::optional<FifoLayout> posix = ReadLayout("posix");
    const std::optional<FifoLayout> sysv = ReadLayout("sysv");
    if (!posix || !sysv) return std::nullopt;
    return FifoLayouts{.posix = *posix, .sysv = *sysv};
  }();
  return layouts;
#else
  return std::nullopt;  // another cache-line size moves the fields
#endif
}

std::vector<FifoMapping> FindSharedMemoryMappings() {
  std::vector<FifoMapping> found;
  // One read, no streams: every process pays this twice as it starts.
  const std::optional<std::string> maps = ReadWholeFile("/proc/self/maps");
  if (!maps) return found;
  std::string_view rest(*maps);
  while (!rest.empty()) {
    const std::size_t end_of_line = rest.find('\n');
    const std::string_view line = rest.substr(0, end_of_line);
    rest.remove_prefix(end_of_line == std::string_view::npos ? rest.size() : end_of_line + 1);
    const bool posix = line.find(" /dev/shm/ucx_shm_posix_") != std::string_view::npos;
    if (!posix && line.find(" /SYSV") == std::string_view::npos) continue;
    // start-end permissions offset device inode path
    std::string_view fields[5];
    std::string_view unread = line;
    for (std::string_view& field : fields) {
      const std::size_t begin = unread.find_first_not_of(' ');
      if (begin == std::string_view::npos) break;
      unread.remove_prefix(begin);
      const std::size_t stop = unread.find(' ');
      field = unread.substr(0, stop);
      unread.remove_prefix(stop == std::string_view::npos ? unread.size() : stop);
    }
    const std::string_view range = fields[0];
    const std::string_view permissions = fields[1];
    if (permissions.size() < 4 || permissions[0] != 'r' || permissions[1] != 'w' ||
        permissions[3] != 's') {
      continue;
    }
    const std::size_t dash = range.find('-');
    if (dash == std::string_view::npos) continue;
    std::uintptr_t start = 0;
    std::uintptr_t end = 0;
    if (std::from_chars(range.data(), range.data() + dash, start, 16).ec != std::errc{} ||
        std::from_chars(range.data() + dash + 1, range.data() + range.size(), end, 16).ec !=
            std::errc{} ||
        end <= start) {
      continue;
    }
    found.push_back({.address = reinterpret_cast<void*>(start),
                     .length = end - start,
                     .identity = std::string(fields[3]) + " " + std::string(fields[4]),
                     .posix = posix});
  }
  return found;
}

std::optional<SharedMemoryFifo> SharedMemoryFifo::Open(const FifoMapping& mapping,
                                                       const FifoLayout& layout) {
  if (layout.slots == 0 || (layout.slots & (layout.slots - 1)) != 0 ||
      layout.slot_size < kSlotDataOffset + kUcpHeaderSize) {
    return std::nullopt;
  }
  // UCT_MM_GET_FIFO_SIZE, rounded to pages by the allocation.
  const std::size_t used = kControlSize + layout.slots * layout.slot_size;
  if (mapping.length != PageRounded(used + kCacheLine - 1)) return std::nullopt;
  const std::optional<std::vector<std::byte>> bytes = ReadOwnMemory(mapping.address, used);
  if (!bytes) return std::nullopt;
  const auto owner = Field<pid_t>(*bytes, kOwnerPidOffset);
  const auto signal_address_length = Field<socklen_t>(*bytes, kSignalAddressLengthOffset);
  const auto family = Field<sa_family_t>(*bytes, kSignalAddressOffset);
  if (owner != getpid() || family != AF_UNIX || signal_address_length < sizeof(sa_family_t) ||
      signal_address_length > sizeof(sockaddr_un)) {
    return std::nullopt;
  }
  // Every slot has a receive descriptor: a slot stride other than UCX's
  // (and not a multiple of it) lands these reads inside slots' data.
  for (std::uint64_t slot = 0; slot < layout.slots; ++slot) {
    const std::size_t at = kControlSize + slot * layout.slot_size;
    if (Field<std::uint32_t>(*bytes, at + kSlotDescriptorSizeOffset) == 0 ||
        Field<std::uint64_t>(*bytes, at + kSlotDescriptorAddressOffset) == 0) {
      return std::nullopt;
    }
  }
  return SharedMemoryFifo(static_cast<std::byte*>(mapping.address), layout, mapping.identity);
}

std::byte* SharedMemoryFifo::Slot(std::uint64_t sequence) const {
  return control_ + kControlSize + (sequence & (layout_.slots - 1)) * layout_.slot_size;
}

bool SharedMemoryFifo::Flagged(std::uint64_t sequence) const {
  // The owner flag a slot gets in the lap of `sequence` (slots is a power
  // of two: the lap's parity is the bit above the slot index).
  const bool lap_flag = (sequence & layout_.slots) != 0;
  const auto flags = LoadAcquire<std::uint8_t>(Slot(sequence) + kSlotFlagsOffset);
  return ((flags & kSlotOwnerFlag) != 0) == lap_flag;
}

std::optional<std::uint64_t> SharedMemoryFifo::FirstUnflaggedSlot() const {
  const std::uint64_t head = LoadAcquire<std::uint64_t>(control_ + kHeadOffset) & ~kHeadArmedBit;
  // Slots below the tail were read; those from the tail up to where the
  // receiver reads were read too and keep their flags until the next lap,
  // which cannot start before the tail passes them.
  const std::uint64_t tail = LoadAcquire<std::uint64_t>(control_ + kTailOffset);
  if (head < tail || head - tail > layout_.slots) return std::nullopt;
  for (std::uint64_t sequence = tail; sequence < head; ++sequence) {
    if (!Flagged(sequence)) return sequence;
  }
  return std::nullopt;
}

bool SharedMemoryFifo::FillAndFlag(std::uint64_t sequence, std::uint16_t message_id) const {
  if (FirstUnflaggedSlot() != sequence) return false;
  std::byte* slot = Slot(sequence);
  auto* flags = reinterpret_cast<std::uint8_t*>(slot + kSlotFlagsOffset);
  const std::uint8_t unflagged = __atomic_load_n(flags, __ATOMIC_ACQUIRE);
  std::byte ucp_header[kUcpHeaderSize]{};
  std::memcpy(ucp_header, &message_id, sizeof(message_id));  // flags and header length stay 0
  std::memcpy(slot + kSlotDataOffset, ucp_header, sizeof(ucp_header));
  const std::uint16_t length = kUcpHeaderSize;
  std::memcpy(slot + kSlotLengthOffset, &length, sizeof(length));
  const std::uint8_t ucx_message_id = kUcpSingleMessageId;
  std::memcpy(slot + kSlotMessageIdOffset, &ucx_message_id, sizeof(ucx_message_id));
  // As a sender does: the contents before the flag that publishes them.
  std::uint8_t expected = unflagged;
  const auto flagged = static_cast<std::uint8_t>(
      kSlotInlineFlag | ((sequence & layout_.slots) != 0 ? kSlotOwnerFlag : 0));
  return __atomic_compare_exchange_n(flags, &expected, flagged, false, __ATOMIC_RELEASE,
                                     __ATOMIC_RELAXED);
}

bool AnotherMapperIsPaused(const std::string& identity) {
  const Directory processes(opendir("/proc"));
  if (!processes) return true;  // cannot tell: leave the slot
  const std::string self = std::to_string(getpid());
  while (const dirent* process = readdir(processes.get())) {
    if (process->d_name[0] < '0' || process->d_name[0] > '9' || self == process->d_name) continue;
    const std::string directory = std::string("/proc/") + process->d_name;
    if (MapsSegment(directory, identity) && AnyThreadPaused(directory)) return true;
  }
  return false;
}

StalledSlotRepair::StalledSlotRepair(std::vector<SharedMemoryFifo> fifos, Settings settings)
    : settings_(std::move(settings)) {
  for (SharedMemoryFifo& fifo : fifos) {
    watches_.push_back(
        Watch{.fifo = fifo, .unflagged = std::nullopt, .since = {}, .last_check = {}});
  }
}

std::size_t StalledSlotRepair::Check(std::chrono::steady_clock::time_point now) {
  std::size_t filled = 0;
  for (Watch& watch : watches_) {
    const bool after_gap = watch.last_check.time_since_epoch().count() == 0 ||
                           now - watch.last_check > settings_.longest_gap;
    watch.last_check = now;
    const std::optional<std::uint64_t> unflagged = watch.fifo.FirstUnflaggedSlot();
    if (!unflagged) {
      watch.unflagged.reset();
      continue;
    }
    if (after_gap || watch.unflagged != unflagged) {
      watch.unflagged = unflagged;
      watch.since = now;
      continue;
    }
    if (now - watch.since < settings_.stall_limit) continue;
    if (settings_.writer_may_be_paused && settings_.writer_may_be_paused(watch.fifo.identity())) {
      watch.since = now;  // look again after another whole limit
      continue;
    }
    watch.unflagged.reset();
    if (!watch.fifo.FillAndFlag(*unflagged, settings_.skipped_slot_message_id)) continue;
    ++filled;
    if (settings_.on_fill) settings_.on_fill(watch.fifo, *unflagged);
  }
  return filled;
}

}  // namespace sray::transport
