#include "core/object_transfer.h"

#include <chrono>
#include <utility>

#include "common/log.h"

namespace sray::core {

ObjectTransfer::ObjectTransfer(std::uint32_t node_id, object::ObjectStore& store,
                               TransferLinks& links)
    : node_id_(node_id), store_(store), links_(links) {}

Result<std::string> ObjectTransfer::MakeLocal(const ObjectId& id, std::uint32_t holder,
                                              std::uint64_t size) {
  if (holder == node_id_) {
    auto path = store_.Locate(id);
    if (!path.ok()) return path.status();
    return path->string();
  }
  std::lock_guard fetch(fetch_mutex_);
  // A copy pulled earlier, unless it has been lost meanwhile.
  if (store_.Contains(id)) {
    auto path = store_.Locate(id);
    if (path.ok()) return path->string();
  }
  const ObjectRequest request{.id = id,
                              .size = size,
                              .holder_node = 0,
                              .puller_node = node_id_,
                              .owner_rank = 0,
                              .incarnation = 0,
                              .pull = ++next_pull_};
  auto source = links_.Pin(holder, request);
  if (!source.ok()) {
    // Unanswered in time, the pin may still happen at the holder: cancel it.
    links_.Unpin(holder, request);
    return source.status().WithContext("cannot reach object " + id.ToString() + " on node " +
                                       std::to_string(holder));
  }
  auto path = store_.Create(id, source->size, false);
  if (!path.ok()) {
    links_.Unpin(holder, request);
    return path.status();
  }
  auto created = object::MappedFile::Create(*path, source->size);
  if (!created.ok()) {
    store_.AbortCopy(id);
    links_.Unpin(holder, request);
    return created.status();
  }
  // Shared with the transport: a pull that gives up while UCX may still
  // write into the mapping keeps it mapped until UCX lets go.
  std::shared_ptr<object::MappedFile> file = std::move(created).value();
  void* const destination = file->data();
  const auto started = std::chrono::steady_clock::now();
  const Status pulled =
      source->size == 0 ? Status::Ok() : links_.Pull(holder, *source, destination, file);
  if (pulled.ok() && source->size >= kLargeTransferBytes && LogEnabled(LogLevel::kDebug)) {
    Log(LogLevel::kDebug,
        "node " + std::to_string(node_id_) + " pulled object " + id.ToString() + " from node " +
            std::to_string(holder) + ": " +
            DescribeTransfer(
                source->size,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()));
  }
  links_.Unpin(holder, request);
  file.reset();
  if (!pulled.ok()) {
    store_.AbortCopy(id);
    return pulled.WithContext("cannot pull object " + id.ToString() + " from node " +
                              std::to_string(holder));
  }
  if (!store_.SealCopy(id)) {
    // Recomputed here while it was pulled: the path is the new attempt's
    // file, perhaps half-written. The read goes the way of a lost copy: it
    // waits for the rebuild already under way.
    return Status::NotFound("object " + id.ToString() + " is being recomputed on node " +
                            std::to_string(node_id_) + ", so its pull was dropped");
  }
  return path->string();
}

Result<PullSource> ObjectTransfer::PinForPull(const ObjectId& id, std::uint32_t puller_node,
                                              std::uint64_t pull) {
  const PullKey key{.node = puller_node, .pull = pull};
  // Found and pinned at once: a spill between the two would move the file
  // away before it is opened. (Outside pulls_mutex_: it may restore from disk.)
  auto path = store_.LocateAndPin(id);
  if (!path.ok()) return path.status();
  std::lock_guard lock(pulls_mutex_);
  if (cancelled_pulls_.erase({id, key}) > 0) {
    store_.Unpin(id);
    return Status::Unavailable("pull " + std::to_string(pull) + " of object " + id.ToString() +
                               " by node " + std::to_string(puller_node) +
                               " was given up before its pin");
  }
  PullRegistration& registration = pull_sources_[id];
  if (registration.file) {
    store_.Unpin(id);  // the registration holds its pin already
  } else {
    auto file = object::MappedFile::OpenReadOnly(*path);
    if (!file.ok()) {
      pull_sources_.erase(id);
      store_.Unpin(id);
      return file.status();
    }
    if ((*file)->size() > 0) {
      auto registered = links_.Register((*file)->data(), (*file)->size(), *path);
      if (!registered.ok()) {
        pull_sources_.erase(id);
        store_.Unpin(id);
        return registered.status();
      }
      registration.registration = std::move(registered).value();
    }
    registration.file = std::move(file).value();
  }
  registration.pulls.insert(key);
  copies_[id].insert(puller_node);
  return PullSource{.address = reinterpret_cast<std::uint64_t>(registration.file->data()),
                    .key = registration.registration.packed_key,
                    .size = registration.file->size()};
}

void ObjectTransfer::UnpinForPull(const ObjectId& id, std::uint32_t puller_node,
                                  std::uint64_t pull) {
  const PullKey key{.node = puller_node, .pull = pull};
  std::lock_guard lock(pulls_mutex_);
  auto found = pull_sources_.find(id);
  if (found == pull_sources_.end() || found->second.pulls.erase(key) == 0) {
    // Before its pin (or for a pin that failed here): cancel the pin.
    if (cancelled_pulls_.insert({id, key}).second) cancelled_order_.emplace_back(id, key);
    while (cancelled_order_.size() > kCancelledPullsKept) {
      cancelled_pulls_.erase(cancelled_order_.front());
      cancelled_order_.pop_front();
    }
    return;
  }
  if (found->second.pulls.empty()) ReleaseLocked(found);
}

void ObjectTransfer::ForgetPuller(std::uint32_t puller_node) {
  std::lock_guard lock(pulls_mutex_);
  for (auto registration = pull_sources_.begin(); registration != pull_sources_.end();) {
    std::erase_if(registration->second.pulls,
                  [puller_node](const PullKey& key) { return key.node == puller_node; });
    auto next = std::next(registration);
    if (registration->second.pulls.empty()) ReleaseLocked(registration);
    registration = next;
  }
  std::erase_if(cancelled_pulls_, [puller_node](const auto& cancelled) {
    return cancelled.second.node == puller_node;
  });
  std::erase_if(cancelled_order_, [puller_node](const auto& cancelled) {
    return cancelled.second.node == puller_node;
  });
}

void ObjectTransfer::ReleaseLocked(std::map<ObjectId, PullRegistration>::iterator registration) {
  const ObjectId id = registration->first;
  pull_sources_.erase(registration);
  store_.Unpin(id);
}

void ObjectTransfer::FreeOwnedBy(const std::function<bool(std::uint64_t owner)>& owned) {
  const std::vector<ObjectId> freed = store_.FreeOwnedBy(owned);
  std::lock_guard lock(pulls_mutex_);
  for (const ObjectId& id : freed) copies_.erase(id);
}

void ObjectTransfer::FreeLocal(const ObjectId& id) {
  store_.Free(id);
  std::set<std::uint32_t> holders;
  {
    std::lock_guard lock(pulls_mutex_);
    auto found = copies_.find(id);
    if (found == copies_.end()) return;
    holders = std::move(found->second);
    copies_.erase(found);
  }
  for (const auto node : holders) links_.FreeCopy(node, id);
}

void ObjectTransfer::Clear() {
  std::lock_guard lock(pulls_mutex_);
  pull_sources_.clear();
}

std::size_t ObjectTransfer::pinned_objects() const {
  std::lock_guard lock(pulls_mutex_);
  return pull_sources_.size();
}

}  // namespace sray::core
