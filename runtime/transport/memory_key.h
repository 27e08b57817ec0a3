#pragma once

// What a peer needs to read registered memory (Transport::Register, Pull):
// UCX's packed remote key, and, for memory that is a shared mapping of a file
// (an object store's file in /dev/shm), where that file is, so that a peer on
// the same host can read the file itself (same_host_reads.h) instead of
// having UCX emulate a get with active messages, two copies through its
// shared-memory queue.
//
// The encoding travels inside runtime messages (PullSource) from other
// processes of the job: the decoder checks every length and fails on
// anything malformed.

#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "common/status.h"
#include "transport/bytes.h"

namespace sray::transport {

// Memory that is a shared mapping of a file: what Transport::Register is
// told so that peers on this host may read the file (memory_key.h).
struct SharedFileRegion {
  std::string path;
  std::uint64_t offset = 0;  // of the memory's first byte in the file
};

// The file behind registered memory, as the registering process saw it.
struct SharedFileOfMemory {
  std::string host;  // the kernel's boot id: the same on every process of one host
  std::string path;
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  std::uint64_t offset = 0;  // of the registered memory's first byte in the file
};

struct MemoryKey {
  Bytes ucx_key;
  std::uint64_t address = 0;  // the registered memory, in its owner's address space
  std::uint64_t length = 0;
  std::optional<SharedFileOfMemory> file;
};

Bytes EncodeMemoryKey(const MemoryKey& key);
Result<MemoryKey> DecodeMemoryKey(std::span<const std::byte> encoded);

// This host's boot id (/proc/sys/kernel/random/boot_id); empty when it cannot
// be read, and then no peer counts as on the same host.
const std::string& ThisHostId();

}  // namespace sray::transport
