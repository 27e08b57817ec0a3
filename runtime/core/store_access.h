#pragma once

// How a process reaches its node's object store: directly when the node
// manager lives in the same process (the driver on node 0, and node
// managers), by RPC to the node manager from a worker.
//
// Thread-safety: implementations may be called from any thread except a
// transport handler (the RPC form blocks).

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"
#include "core/protocol.h"

namespace sray::core {

// Objects up to this size travel inside messages; larger ones go to the store.
inline constexpr std::size_t kInlineObjectLimit = std::size_t{100} * 1024;

// How far Seal goes before it returns.
enum class SealWait {
  // Ordered before this process's next message to its node manager, and no
  // further: enough for a task's result, whose outcome travels through that
  // manager, which then has sealed it before anyone hears of it.
  kBeforeNextManagerMessage,
  // Until the node's store has sealed it: the object's news leaves by
  // another way (an actor call's outcome goes straight to its caller, a
  // Put's reference to anyone), and a reader's pull would otherwise race the
  // seal and find the object still being created.
  kUntilSealed,
};

class StoreAccess {
 public:
  virtual ~StoreAccess() = default;
  // Objects up to this size stay in memory (in messages, in the owner);
  // larger ones go to the store. Local mode keeps every object in memory.
  [[nodiscard]] virtual std::size_t inline_limit() const { return kInlineObjectLimit; }
  // Reserves room for a new object of this node (spilling others when
  // needed) and returns the path to create; ResourceExhausted when full.
  // `incarnation`: of the actor whose call makes it (0 for anything else).
  virtual Result<std::string> Create(const ObjectId& id, std::uint64_t size,
                                     std::int32_t incarnation) = 0;
  // Makes the object readable. `incarnation` as given to Create: a seal
  // that is not of the attempt that created the entry fails (NotFound),
  // which only kUntilSealed hears.
  virtual Status Seal(const ObjectId& id, std::uint64_t size, std::int32_t incarnation,
                      SealWait wait) = 0;
  // Makes the object readable on this node, pulling it from `holder_node`
  // or restoring it from disk as needed, and returns its path.
  virtual Result<std::string> MakeLocal(const ObjectId& id, std::uint32_t holder_node,
                                        std::uint64_t size) = 0;
  // The owner frees the object on the node that holds its primary copy.
  virtual void Free(const ObjectId& id, std::uint32_t holder_node) = 0;
  // Frees the primary copy on its node only if that attempt created it
  // (core/protocol.h, OrphanedResult).
  virtual void DiscardOrphan(const OrphanedResult& orphan) = 0;
};

}  // namespace sray::core
