#pragma once

// One node's object store: immutable objects, one file each in /dev/shm
// under a name unique to job, step and node, so processes on the node map
// them directly (zero-copy Get). The store accounts their bytes against its
// capacity; when a new object does not fit it spills the least recently used
// unpinned objects to the session directory on node-local disk (copies fetched
// from other nodes are dropped instead: their primary lives on) and restores
// them on demand. When even that cannot make room, creation fails with an
// error naming the sizes. Nothing is lost silently.
//
// Thread-safety: every member may be called from any thread, but none may
// still be running when the store is destroyed. The copies of a
// spill or a restore run without the store's lock (the object marked as
// being copied), so seals, frees and pins, which the node manager serves on
// the transport's thread, never wait behind a large copy.

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "sray/internal/object_id.h"

namespace sray::object {

using internal::ObjectId;

struct StoreConfig {
  std::filesystem::path shared_memory_directory = "/dev/shm";
  // "sray.<job>.<step>.n<node>": unique per job, step and node.
  std::string name_prefix;
  std::filesystem::path spill_directory;
  std::uint64_t capacity = 0;
  std::uint32_t node_id = 0;
  // Told of each object spilled to disk (its bytes), for the node's events.
  // Called with the store's lock held: it must not call the store.
  std::function<void(std::uint64_t bytes)> on_spilled;
  // Called as each spill or restore starts copying, without the store's
  // lock (tests hold a copy there to act on the store meanwhile). It must
  // not need room in the store: making room would wait for this very copy.
  std::function<void(const ObjectId& id)> while_copying;
};

struct StoreUsageSnapshot {
  std::uint64_t capacity = 0;
  std::uint64_t in_memory = 0;  // objects in shared memory
  std::uint64_t recycled = 0;   // freed object files kept for reuse
  std::uint64_t spilled = 0;
  std::uint64_t objects = 0;
};

// Which attempt created a primary entry: the process's rank, and the
// incarnation of the actor whose call made it (0 for anything else).
struct ObjectMaker {
  std::uint32_t rank = 0;
  std::int32_t incarnation = 0;
  friend bool operator==(const ObjectMaker&, const ObjectMaker&) = default;
};

class ObjectStore {
 public:
  // Checks that the shared-memory directory can hold `capacity` bytes.
  static Result<std::unique_ptr<ObjectStore>> Open(StoreConfig config);
  // Removes every object and spill file of this store.
  ~ObjectStore();
  ObjectStore(const ObjectStore&) = delete;
  ObjectStore& operator=(const ObjectStore&) = delete;

  // Makes room for a new object and returns the path its creator writes;
  // Seal makes it readable and spillable. `primary` is false for copies
  // pulled from another node; `maker` names the attempt that creates it.
  Result<std::filesystem::path> Create(const ObjectId& id, std::uint64_t size, bool primary,
                                       ObjectMaker maker = {});
  void Seal(const ObjectId& id);
  // Seal of a primary entry by the attempt that made it. NotFound, leaving
  // the entry as it is, when the store has no such entry or a later attempt
  // (a retry, another incarnation) created it since: a seal that arrives late
  // from a dead attempt must not make a retry's unwritten file readable.
  Status SealMadeBy(const ObjectId& id, ObjectMaker maker);
  // Removes an object that was created but never sealed (its writer failed).
  void Abort(const ObjectId& id);
  // Seal and Abort of a copy being pulled from another node: they act only
  // on that copy, never on a primary entry that replaced it meanwhile (the
  // object recomputed here: Create drops the copy's record). SealCopy says
  // whether the copy was still there and is now readable.
  bool SealCopy(const ObjectId& id);
  void AbortCopy(const ObjectId& id);
  // The path of the object in shared memory, restoring it from disk when it
  // was spilled. NotFound when the store does not have it.
  Result<std::filesystem::path> Locate(const ObjectId& id);
  // Locate, and Pin in the same step, so that nothing spills or frees the
  // object between finding it and opening its file (Unpin when done).
  Result<std::filesystem::path> LocateAndPin(const ObjectId& id);
  [[nodiscard]] bool Contains(const ObjectId& id) const;
  [[nodiscard]] std::uint64_t SizeOf(const ObjectId& id) const;
  // Pinned objects are neither spilled nor dropped (a pull or a task reads them).
  void Pin(const ObjectId& id);
  void Unpin(const ObjectId& id);
  void Free(const ObjectId& id);
  // Frees every object (primary or copy, sealed or not) whose owner rank
  // `owned` accepts, and returns their ids: its owner has ended, so nobody
  // can read it again. Files are unlinked, never recycled: a task that mapped
  // one as an argument may still be reading it.
  std::vector<ObjectId> FreeOwnedBy(const std::function<bool(std::uint64_t owner)>& owned);
  // Frees the object only if a worker of this node made it (Create with
  // `primary`) and nothing pins it: what a dead task attempt left. A copy
  // pulled from another node (a retry's result, read here) stays.
  void DiscardPrimary(const ObjectId& id);
  // The same, and only if that attempt created it: what an actor's process
  // stored before it died or before its caller gave up the call. A retry's
  // result of the same id (a later incarnation, maybe in the same process)
  // stays.
  void DiscardOrphan(const ObjectId& id, ObjectMaker maker);
  [[nodiscard]] StoreUsageSnapshot Usage() const;
  [[nodiscard]] std::filesystem::path PathOf(const ObjectId& id) const;

 private:
  // kSpilling: in memory (readable), its copy to disk under way; kRestoring:
  // on disk, its copy back under way (its memory already counted).
  enum class Where { kCreating, kMemory, kSpilling, kRestoring, kDisk };
  struct Entry {
    std::uint64_t size = 0;
    Where where = Where::kCreating;
    bool primary = true;
    ObjectMaker maker;  // primary entries
    int pins = 0;
    std::uint64_t last_use = 0;
    // Unique per entry: a copy that ends after its entry was freed, or
    // replaced by a new one of the same id, finds out and touches nothing.
    std::uint64_t serial = 0;
  };

  explicit ObjectStore(StoreConfig config) : config_(std::move(config)) {}
  // Per entry, not per id: a stale spill never writes a newer entry's file.
  [[nodiscard]] std::filesystem::path SpillPathOf(const ObjectId& id, std::uint64_t serial) const;
  // Frees memory until `size` more bytes fit. `lock` holds mutex_, and is
  // let go while a spill copies: entries may change meanwhile, and once
  // `needed` (when given) says false, the room is no longer wanted (the
  // object to restore was restored by another caller) and it returns Ok.
  Status MakeRoom(std::unique_lock<std::mutex>& lock, std::uint64_t size, const ObjectId& for_id,
                  const std::function<bool()>& needed = {});
  Status Spill(std::unique_lock<std::mutex>& lock, const ObjectId& id);
  Result<std::filesystem::path> LocateLocked(std::unique_lock<std::mutex>& lock,
                                             const ObjectId& id);
  // Copies `from` to `to` without the lock; the entry is marked as copied.
  std::error_code CopyUnlocked(std::unique_lock<std::mutex>& lock, const ObjectId& id,
                               const std::filesystem::path& from, const std::filesystem::path& to);

  // Freed files of at least this size are kept and reused: a fresh tmpfs
  // page costs more than copying into it (allocation, zeroing, freeing).
  static constexpr std::uint64_t kRecycleMinimum = std::uint64_t{1} << 20;
  // Takes a recycled file of about `size` bytes for `id`, if there is one.
  bool ReuseRecycledLocked(const ObjectId& id, std::uint64_t size);
  void RecycleLocked(const ObjectId& id, std::uint64_t size);
  bool DropOneRecycledLocked();

  const StoreConfig config_;
  mutable std::mutex mutex_;
  std::condition_variable copy_ended_;  // a spill's or a restore's copy ended
  int copies_under_way_ = 0;            // by mutex_
  std::uint64_t next_serial_ = 0;       // by mutex_
  // Recycled files by size; names are <prefix>.recycled.<n>.
  std::multimap<std::uint64_t, std::filesystem::path> recycled_;
  std::uint64_t recycled_bytes_ = 0;
  std::uint64_t next_recycled_ = 0;
  using Entries = std::unordered_map<ObjectId, Entry, internal::ObjectIdHash>;
  // Removes the entry and its file (or recycles the file when
  // `may_recycle`); mutex_ held.
  void EraseLocked(Entries::iterator found, bool may_recycle = true);
  Entries entries_;
  std::uint64_t in_memory_ = 0;
  std::uint64_t spilled_ = 0;
  std::uint64_t clock_ = 0;
};

}  // namespace sray::object
