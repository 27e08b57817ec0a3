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
  const ObjectRequest request{
      .id = id, .size = size, .holder_node = 0, .puller_node = node_id_, .owner_rank = 0};
  auto source = links_.Pin(holder, request);
  if (!source.ok()) {
    return source.status().WithContext("cannot reach object " + id.ToString() + " on node " +
                                       std::to_string(holder));
  }
  auto path = store_.Create(id, source->size, false);
  if (!path.ok()) {
    links_.Unpin(holder, request);
    return path.status();
  }
  auto file = object::MappedFile::Create(*path, source->size);
  if (!file.ok()) {
    store_.Abort(id);
    links_.Unpin(holder, request);
    return file.status();
  }
  const auto started = std::chrono::steady_clock::now();
  const Status pulled =
      source->size == 0 ? Status::Ok() : links_.Pull(holder, *source, (*file)->data());
  if (pulled.ok() && source->size >= kLargeTransferBytes && LogEnabled(LogLevel::kDebug)) {
    Log(LogLevel::kDebug,
        "node " + std::to_string(node_id_) + " pulled object " + id.ToString() + " from node " +
            std::to_string(holder) + ": " +
            DescribeTransfer(
                source->size,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count()));
  }
  links_.Unpin(holder, request);
  file->reset();
  if (!pulled.ok()) {
    store_.Abort(id);
    return pulled.WithContext("cannot pull object " + id.ToString() + " from node " +
                              std::to_string(holder));
  }
  store_.Seal(id);
  return path->string();
}

Result<PullSource> ObjectTransfer::PinForPull(const ObjectId& id, std::uint32_t puller_node) {
  // Found and pinned at once: a spill between the two would move the file
  // away before it is opened. (Outside pulls_mutex_: it may restore from disk.)
  auto path = store_.LocateAndPin(id);
  if (!path.ok()) return path.status();
  std::lock_guard lock(pulls_mutex_);
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
  registration.pulls++;
  copies_[id].insert(puller_node);
  return PullSource{.address = reinterpret_cast<std::uint64_t>(registration.file->data()),
                    .key = registration.registration.packed_key,
                    .size = registration.file->size()};
}

void ObjectTransfer::UnpinForPull(const ObjectId& id) {
  std::lock_guard lock(pulls_mutex_);
  auto found = pull_sources_.find(id);
  if (found == pull_sources_.end()) return;
  if (--found->second.pulls > 0) return;
  pull_sources_.erase(found);
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
