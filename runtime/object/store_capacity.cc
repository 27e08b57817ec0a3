#include "object/store_capacity.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "common/mebibytes.h"

namespace sray::object {

Result<std::uint64_t> StoreCapacity(std::optional<std::uint64_t> configured,
                                    std::uint64_t shared_memory_bytes, std::uint32_t nodes_here) {
  const std::uint32_t nodes = std::max<std::uint32_t>(1, nodes_here);
  const std::string sharing =
      nodes > 1 ? " (" + std::to_string(nodes) + " nodes of the step share this machine's)" : "";
  if (configured) {
    if (*configured < kMinimumStoreBytes) {
      return Status::InvalidArgument("object_store_memory=" + WholeMebibytes(*configured) +
                                     " is below the object store's minimum of " +
                                     WholeMebibytes(kMinimumStoreBytes) + ": set at least that");
    }
    if (*configured > shared_memory_bytes / nodes) {
      return Status::ResourceExhausted(
          "object_store_memory=" + WholeMebibytes(*configured) +
          " per node does not fit in /dev/shm" + sharing + ", which holds " +
          WholeMebibytes(shared_memory_bytes) +
          ": lower object_store_memory, or enlarge /dev/shm (mount -o remount,size=... /dev/shm; "
          "docker run --shm-size=...)");
    }
    return *configured;
  }
  const auto share = static_cast<std::uint64_t>(static_cast<double>(shared_memory_bytes) *
                                                kDefaultStoreFraction / nodes);
  if (share < kMinimumStoreBytes) {
    return Status::ResourceExhausted(
        "/dev/shm holds only " + WholeMebibytes(shared_memory_bytes) + sharing +
        ", and the object " + "store's default share of it (" + WholeMebibytes(share) +
        ") is below its minimum of " + WholeMebibytes(kMinimumStoreBytes) +
        ": enlarge /dev/shm (mount -o remount,size=... /dev/shm; docker run --shm-size=...) or "
        "set object_store_memory");
  }
  return share;
}

Result<std::uint64_t> StoreCapacityHere(const std::filesystem::path& directory,
                                        std::optional<std::uint64_t> configured,
                                        std::uint32_t nodes_here) {
  struct statvfs filesystem {};
  if (::statvfs(directory.c_str(), &filesystem) != 0) {
    return Status::FromErrno(errno,
                             "cannot inspect " + directory.string() + " for the object store");
  }
  return StoreCapacity(configured, std::uint64_t{filesystem.f_blocks} * filesystem.f_frsize,
                       nodes_here);
}

}  // namespace sray::object
