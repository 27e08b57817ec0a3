#include "object/object_store.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <vector>

#include "common/mebibytes.h"
#include "common/private_file.h"

namespace sray::object {

Result<std::unique_ptr<ObjectStore>> ObjectStore::Open(StoreConfig config) {
  struct statvfs filesystem {};
  if (::statvfs(config.shared_memory_directory.c_str(), &filesystem) != 0) {
    return Status::FromErrno(errno, "cannot inspect " + config.shared_memory_directory.string());
  }
  const std::uint64_t available =
      static_cast<std::uint64_t>(filesystem.f_bavail) * filesystem.f_frsize;
  if (config.capacity > available) {
    return Status::ResourceExhausted(
        "object store of node " + std::to_string(config.node_id) + ": " +
        config.shared_memory_directory.string() + " has " + WholeMebibytes(available) +
        " free but the store needs " + WholeMebibytes(config.capacity) +
        ": set object_store_memory lower (e.g. --ray-cluster=object_store_memory=" +
        std::to_string((available / 2) >> 20) + "M) or give the node more " +
        config.shared_memory_directory.string());
  }
  // The spill files hold the job's objects: a directory of the job user alone.
  if (Status created = CreatePrivateDirectoryIn(config.spill_directory, ::getuid(), "spill directory");
      !created.ok()) {
    return created;
  }
  return std::unique_ptr<ObjectStore>(new ObjectStore(std::move(config)));
}

ObjectStore::~ObjectStore() {
  std::unique_lock lock(mutex_);
  // A copy under way still uses the entries' files.
  copy_ended_.wait(lock, [this] { return copies_under_way_ == 0; });
  for (const auto& [size, path] : recycled_) ::unlink(path.c_str());
  for (const auto& [id, entry] : entries_) {
    ::unlink(PathOf(id).c_str());
    ::unlink(SpillPathOf(id, entry.serial).c_str());
  }
  std::error_code ignored;
  std::filesystem::remove_all(config_.spill_directory, ignored);
}

std::filesystem::path ObjectStore::PathOf(const ObjectId& id) const {
  return config_.shared_memory_directory / (config_.name_prefix + "." + id.ToString());
}

std::filesystem::path ObjectStore::SpillPathOf(const ObjectId& id, std::uint64_t serial) const {
  return config_.spill_directory / (id.ToString() + "." + std::to_string(serial));
}

Result<std::filesystem::path> ObjectStore::Create(const ObjectId& id, std::uint64_t size,
                                                  bool primary, ObjectMaker maker) {
  std::unique_lock lock(mutex_);
  // Recomputed after its copy was lost: the old record goes (again after
  // making room, which lets the lock go while a spill copies).
  auto existing = entries_.find(id);
  if (existing != entries_.end()) EraseLocked(existing, false);
  if (!ReuseRecycledLocked(id, size)) SRAY_RETURN_IF_ERROR(MakeRoom(lock, size, id));
  existing = entries_.find(id);
  if (existing != entries_.end()) EraseLocked(existing, false);
  entries_[id] = Entry{.size = size,
                       .where = Where::kCreating,
                       .primary = primary,
                       .maker = maker,
                       .pins = 0,
                       .last_use = ++clock_,
                       .serial = ++next_serial_};
  in_memory_ += size;
  return PathOf(id);
}

void ObjectStore::Seal(const ObjectId& id) {
  std::lock_guard lock(mutex_);
  auto found = entries_.find(id);
  if (found != entries_.end() && found->second.where == Where::kCreating) {
    found->second.where = Where::kMemory;
  }
}

Status ObjectStore::SealMadeBy(const ObjectId& id, ObjectMaker maker) {
  std::lock_guard lock(mutex_);
  auto found = entries_.find(id);
  if (found == entries_.end() || !found->second.primary || found->second.maker != maker) {
    return Status::NotFound(
        "object " + id.ToString() + " was not created by rank " + std::to_string(maker.rank) +
        " (incarnation " + std::to_string(maker.incarnation) + ") in the store of node " +
        std::to_string(config_.node_id) + ": it was freed, or a later attempt created it since");
  }
  if (found->second.where == Where::kCreating) found->second.where = Where::kMemory;
  return Status::Ok();
}

void ObjectStore::Abort(const ObjectId& id) {
  std::lock_guard lock(mutex_);
  auto found = entries_.find(id);
  if (found == entries_.end() || found->second.where != Where::kCreating) return;
  in_memory_ -= found->second.size;
  ::unlink(PathOf(id).c_str());
  entries_.erase(found);
}

bool ObjectStore::SealCopy(const ObjectId& id) {
  std::lock_guard lock(mutex_);
  auto found = entries_.find(id);
  if (found == entries_.end() || found->second.primary || found->second.where != Where::kCreating) {
    return false;
  }
  found->second.where = Where::kMemory;
  return true;
}

void ObjectStore::AbortCopy(const ObjectId& id) {
  std::lock_guard lock(mutex_);
  auto found = entries_.find(id);
  if (found == entries_.end() || found->second.primary || found->second.where != Where::kCreating) {
    return;
  }
  in_memory_ -= found->second.size;
  ::unlink(PathOf(id).c_str());
  entries_.erase(found);
}

Status ObjectStore::MakeRoom(std::unique_lock<std::mutex>& lock, std::uint64_t size,
                             const ObjectId& for_id, const std::function<bool()>& needed) {
  if (size > config_.capacity) {
    return Status::ResourceExhausted("object " + for_id.ToString() + " of " + std::to_string(size) +
                                     " bytes is larger than the whole object store of node " +
                                     std::to_string(config_.node_id) + " (" +
                                     std::to_string(config_.capacity) +
                                     " bytes): raise object_store_memory or split the object");
  }
  while (in_memory_ + recycled_bytes_ + size > config_.capacity) {
    if (needed && !needed()) return Status::Ok();
    if (DropOneRecycledLocked()) continue;
    // Least recently used, unpinned, sealed.
    auto chosen = entries_.end();
    for (auto entry = entries_.begin(); entry != entries_.end(); ++entry) {
      if (entry->second.where != Where::kMemory || entry->second.pins > 0) continue;
      if (chosen == entries_.end() || entry->second.last_use < chosen->second.last_use) {
        chosen = entry;
      }
    }
    if (chosen == entries_.end()) {
      // Another spill under way will free memory, or a restore will end
      // with an object that can be spilled: wait for it, then look again.
      if (copies_under_way_ > 0) {
        copy_ended_.wait(lock);
        continue;
      }
      return Status::ResourceExhausted(
          "object " + for_id.ToString() + " of " + std::to_string(size) +
          " bytes does not fit the object store of node " + std::to_string(config_.node_id) + ": " +
          std::to_string(in_memory_) + " of " + std::to_string(config_.capacity) +
          " bytes are held by objects in use that cannot be spilled: drop references you no "
          "longer need, or raise object_store_memory");
    }
    const ObjectId victim = chosen->first;
    if (!chosen->second.primary) {
      // A copy of an object whose primary lives on another node.
      EraseLocked(chosen, false);
      continue;
    }
    if (::access(PathOf(victim).c_str(), F_OK) != 0 && errno == ENOENT) {
      // Its file vanished (see LocateLocked): the object is lost, and
      // nothing is left to spill. Choosing it again would fail every
      // Create that needs room, for good.
      in_memory_ -= chosen->second.size;
      entries_.erase(chosen);
      continue;
    }
    SRAY_RETURN_IF_ERROR(Spill(lock, victim));
  }
  return Status::Ok();
}

std::error_code ObjectStore::CopyUnlocked(std::unique_lock<std::mutex>& lock, const ObjectId& id,
                                          const std::filesystem::path& from,
                                          const std::filesystem::path& to) {
  ++copies_under_way_;
  lock.unlock();
  if (config_.while_copying) config_.while_copying(id);
  std::error_code error;
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing, error);
  lock.lock();
  --copies_under_way_;
  copy_ended_.notify_all();
  return error;
}

Status ObjectStore::Spill(std::unique_lock<std::mutex>& lock, const ObjectId& id) {
  Entry& entry = entries_.at(id);
  const std::uint64_t serial = entry.serial;
  const std::uint64_t last_use = entry.last_use;
  const std::uint64_t size = entry.size;
  const auto spill_path = SpillPathOf(id, serial);
  entry.where = Where::kSpilling;
  const std::error_code error = CopyUnlocked(lock, id, PathOf(id), spill_path);
  auto found = entries_.find(id);
  if (found == entries_.end() || found->second.serial != serial) {
    // Freed (or freed and made again) while it was copied: Free gave its
    // memory back already.
    ::unlink(spill_path.c_str());
    return Status::Ok();
  }
  Entry& copied = found->second;
  if (error) {
    copied.where = Where::kMemory;
    ::unlink(spill_path.c_str());
    return Status::ResourceExhausted(
        "cannot spill object " + id.ToString() + " (" + std::to_string(size) + " bytes) to " +
        config_.spill_directory.string() + ": " + error.message() + ": the object store of node " +
        std::to_string(config_.node_id) + " is full (" + std::to_string(in_memory_) + " of " +
        std::to_string(config_.capacity) +
        " bytes) and its disk cannot take more: free space under tmpdir or drop references");
  }
  if (copied.pins > 0 || copied.last_use != last_use) {
    // Pinned or located while it was copied (a pull or a task reads it, and
    // may be opening its file now): it stays in memory, and the caller looks
    // for another object to spill (this one is the most recently used now).
    copied.where = Where::kMemory;
    ::unlink(spill_path.c_str());
    return Status::Ok();
  }
  ::unlink(PathOf(id).c_str());
  copied.where = Where::kDisk;
  in_memory_ -= size;
  spilled_ += size;
  if (config_.on_spilled) config_.on_spilled(size);
  return Status::Ok();
}

Result<std::filesystem::path> ObjectStore::Locate(const ObjectId& id) {
  std::unique_lock lock(mutex_);
  return LocateLocked(lock, id);
}

Result<std::filesystem::path> ObjectStore::LocateAndPin(const ObjectId& id) {
  std::unique_lock lock(mutex_);
  auto path = LocateLocked(lock, id);
  if (path.ok()) entries_.at(id).pins++;
  return path;
}

Result<std::filesystem::path> ObjectStore::LocateLocked(std::unique_lock<std::mutex>& lock,
                                                        const ObjectId& id) {
  const auto not_found = [&] {
    return Status::NotFound("object " + id.ToString() + " is not in the store of node " +
                            std::to_string(config_.node_id));
  };
  while (true) {
    auto found = entries_.find(id);
    if (found == entries_.end() || found->second.where == Where::kCreating) return not_found();
    Entry& entry = found->second;
    entry.last_use = ++clock_;
    if (entry.where == Where::kRestoring) {
      // Another caller is copying it back: wait for that copy.
      copy_ended_.wait(lock);
      continue;
    }
    if (entry.where == Where::kMemory || entry.where == Where::kSpilling) {
      // Its file can vanish (removed by hand, a node's /dev/shm wiped): the
      // object is then lost, and its owner may recompute it.
      if (entry.where == Where::kMemory && ::access(PathOf(id).c_str(), F_OK) != 0) {
        in_memory_ -= entry.size;
        entries_.erase(found);
        return Status::NotFound("object " + id.ToString() + " of node " +
                                std::to_string(config_.node_id) + " is lost: its file " +
                                PathOf(id).string() + " is gone");
      }
      return PathOf(id);
    }
    // Restore: pinned so that making room does not pick it. Making room may
    // let the lock go; the entry may be freed or restored by another caller
    // meanwhile, so it is looked up again after.
    const std::uint64_t serial = entry.serial;
    const std::uint64_t size = entry.size;
    entry.pins++;
    // A second reader meeting the same spilled object waits for the first
    // one's restore (its copy) and then finds it in memory: the room it
    // was making is not needed, and asking for it would fail, this reader's
    // own pin keeping the restored object from being spilled.
    const Status room = MakeRoom(lock, size, id, [&] {
      const auto current = entries_.find(id);
      return current != entries_.end() && current->second.serial == serial &&
             current->second.where == Where::kDisk;
    });
    found = entries_.find(id);
    if (found == entries_.end() || found->second.serial != serial) return not_found();
    found->second.pins--;
    SRAY_RETURN_IF_ERROR(room);
    if (found->second.where != Where::kDisk) continue;
    // Copied beside its final name and renamed once whole: the name may be
    // taken meanwhile by a new object of the same id (a recomputation).
    const auto restoring =
        config_.shared_memory_directory /
        (config_.name_prefix + ".restoring." + id.ToString() + "." + std::to_string(serial));
    found->second.where = Where::kRestoring;
    in_memory_ += size;
    const std::error_code error = CopyUnlocked(lock, id, SpillPathOf(id, serial), restoring);
    found = entries_.find(id);
    if (found == entries_.end() || found->second.serial != serial) {
      // Freed while it was copied back: Free gave its memory back already.
      ::unlink(restoring.c_str());
      return not_found();
    }
    if (error) {
      ::unlink(restoring.c_str());
      found->second.where = Where::kDisk;
      in_memory_ -= size;
      // A copy into a full tmpfs may say EIO rather than ENOSPC (seen with
      // libstdc++'s copy_file): the free space decides.
      struct statvfs filesystem {};
      const bool full =
          error == std::errc::no_space_on_device ||
          (::statvfs(config_.shared_memory_directory.c_str(), &filesystem) == 0 &&
           static_cast<std::uint64_t>(filesystem.f_bavail) * filesystem.f_frsize < size);
      if (full) {
        // The store's own count had room: /dev/shm holds more than the
        // store's objects (other jobs, files freed while still mapped).
        return Status::ResourceExhausted(
            "cannot restore spilled object " + id.ToString() + " (" + std::to_string(size) +
            " bytes): " + config_.shared_memory_directory.string() +
            " is full, beyond the object store's own objects: free space there (other jobs' "
            "files) or lower object_store_memory");
      }
      return Status::IoError("cannot restore spilled object " + id.ToString() + " from " +
                             SpillPathOf(id, serial).string() + ": " + error.message());
    }
    if (::rename(restoring.c_str(), PathOf(id).c_str()) != 0) {
      const int why = errno;
      ::unlink(restoring.c_str());
      found->second.where = Where::kDisk;
      in_memory_ -= size;
      return Status::FromErrno(why, "cannot restore spilled object " + id.ToString());
    }
    ::unlink(SpillPathOf(id, serial).c_str());
    found->second.where = Where::kMemory;
    spilled_ -= size;
    return PathOf(id);
  }
}

bool ObjectStore::Contains(const ObjectId& id) const {
  std::lock_guard lock(mutex_);
  auto found = entries_.find(id);
  return found != entries_.end() && found->second.where != Where::kCreating;
}

std::uint64_t ObjectStore::SizeOf(const ObjectId& id) const {
  std::lock_guard lock(mutex_);
  auto found = entries_.find(id);
  return found == entries_.end() ? 0 : found->second.size;
}

void ObjectStore::Pin(const ObjectId& id) {
  std::lock_guard lock(mutex_);
  auto found = entries_.find(id);
  if (found != entries_.end()) found->second.pins++;
}

void ObjectStore::Unpin(const ObjectId& id) {
  std::lock_guard lock(mutex_);
  auto found = entries_.find(id);
  if (found != entries_.end() && found->second.pins > 0) found->second.pins--;
}

void ObjectStore::DiscardPrimary(const ObjectId& id) {
  std::lock_guard lock(mutex_);
  auto found = entries_.find(id);
  if (found == entries_.end() || !found->second.primary || found->second.pins > 0) return;
  EraseLocked(found);
}

void ObjectStore::DiscardOrphan(const ObjectId& id, ObjectMaker maker) {
  std::lock_guard lock(mutex_);
  auto found = entries_.find(id);
  if (found == entries_.end() || !found->second.primary || found->second.pins > 0 ||
      found->second.maker != maker) {
    return;
  }
  EraseLocked(found);
}

void ObjectStore::Free(const ObjectId& id) {
  std::lock_guard lock(mutex_);
  auto found = entries_.find(id);
  if (found == entries_.end()) return;
  EraseLocked(found);
}

std::vector<ObjectId> ObjectStore::FreeOwnedBy(
    const std::function<bool(std::uint64_t owner)>& owned) {
  std::lock_guard lock(mutex_);
  std::vector<ObjectId> freed;
  for (auto entry = entries_.begin(); entry != entries_.end();) {
    auto next = std::next(entry);
    if (owned(entry->first.owner)) {
      freed.push_back(entry->first);
      EraseLocked(entry, false);
    }
    entry = next;
  }
  return freed;
}

void ObjectStore::EraseLocked(Entries::iterator found, bool may_recycle) {
  const ObjectId id = found->first;
  if (found->second.where == Where::kDisk || found->second.where == Where::kRestoring) {
    // A restore under way has counted its memory already, and removes its
    // partial copy itself when it finds the entry gone.
    ::unlink(SpillPathOf(id, found->second.serial).c_str());
    spilled_ -= found->second.size;
    if (found->second.where == Where::kRestoring) in_memory_ -= found->second.size;
  } else {
    in_memory_ -= found->second.size;
    // A pinned object is being read by a pull (a same-host peer may have its
    // file mapped): recycling would let the next Create shrink the file under
    // that reader (SIGBUS) or overwrite what it copies. Deleted, the file
    // keeps its bytes until the last mapping goes.
    if (may_recycle && found->second.where == Where::kMemory &&
        found->second.size >= kRecycleMinimum && found->second.pins == 0) {
      RecycleLocked(id, found->second.size);
    } else {
      ::unlink(PathOf(id).c_str());
    }
  }
  entries_.erase(found);
}

void ObjectStore::RecycleLocked(const ObjectId& id, std::uint64_t size) {
  const auto target = config_.shared_memory_directory /
                      (config_.name_prefix + ".recycled." + std::to_string(next_recycled_++));
  if (::rename(PathOf(id).c_str(), target.c_str()) != 0) {
    ::unlink(PathOf(id).c_str());
    return;
  }
  recycled_.emplace(size, target);
  recycled_bytes_ += size;
  // Keep at most a quarter of the store idle.
  while (recycled_bytes_ > config_.capacity / 4 && DropOneRecycledLocked()) {
  }
}

bool ObjectStore::ReuseRecycledLocked(const ObjectId& id, std::uint64_t size) {
  if (size < kRecycleMinimum) return false;
  // The smallest file that holds it, unless it is more than twice as big.
  auto found = recycled_.lower_bound(size);
  if (found == recycled_.end() || found->first > 2 * size) return false;
  const std::uint64_t old_size = found->first;
  if (in_memory_ + recycled_bytes_ - old_size + size > config_.capacity) return false;
  if (::rename(found->second.c_str(), PathOf(id).c_str()) != 0) return false;
  recycled_bytes_ -= old_size;
  recycled_.erase(found);
  return true;
}

bool ObjectStore::DropOneRecycledLocked() {
  if (recycled_.empty()) return false;
  auto largest = std::prev(recycled_.end());
  ::unlink(largest->second.c_str());
  recycled_bytes_ -= largest->first;
  recycled_.erase(largest);
  return true;
}

StoreUsageSnapshot ObjectStore::Usage() const {
  std::lock_guard lock(mutex_);
  return {.capacity = config_.capacity,
          .in_memory = in_memory_,
          .recycled = recycled_bytes_,
          .spilled = spilled_,
          .objects = entries_.size()};
}

}  // namespace sray::object
