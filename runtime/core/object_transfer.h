#pragma once

// Objects moving between nodes' stores: pulling a copy here (MakeLocal),
// lending a local object to a node that pulls it (PinForPull, UnpinForPull:
// mapped, registered for RMA and pinned in the store while pulls run), and
// freeing an object together with the copies other nodes pulled (FreeLocal).
// The transport is behind TransferLinks, so the rules are testable without
// one (tests/unit/object_transfer_test.cc).
//
// Thread-safety: every member may be called from any thread; they block
// (pulls, file mappings), so the node manager calls them from its executors,
// never from a transport handler: MakeLocal (which waits for another node's
// pin) from its pulls executor, the rest from its blocking executor.

#include <compare>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "common/status.h"
#include "core/protocol.h"
#include "object/mapped_file.h"
#include "object/object_store.h"

namespace sray::core {

// How object transfer reaches other nodes; the node manager implements it
// over the transport.
class TransferLinks {
 public:
  virtual ~TransferLinks() = default;
  // Memory registered for peers' RMA reads until the returned handle goes.
  struct Registration {
    std::shared_ptr<void> handle;
    std::string packed_key;
  };
  // `file`: the shared mapping's file (an object's file in the store), which
  // a puller on this host reads instead.
  virtual Result<Registration> Register(void* address, std::size_t length,
                                        const std::filesystem::path& file) = 0;
  // Asks `holder_node` to pin `id` for this node's pull (kPinForPull).
  virtual Result<PullSource> Pin(std::uint32_t holder_node, const ObjectRequest& request) = 0;
  // Releases that pin (kUnpinForPull); does not wait.
  virtual void Unpin(std::uint32_t holder_node, const ObjectRequest& request) = 0;
  // Reads the pinned object's bytes into `destination`.
  // `destination_owner` owns `destination`: a pull that gives up while the
  // transfer may still write there keeps it until then (Transport::Pull).
  virtual Status Pull(std::uint32_t holder_node, const PullSource& source, void* destination,
                      std::shared_ptr<void> destination_owner) = 0;
  // Tells `node` to free its copy of `id` (kFreeObject); does not wait.
  virtual void FreeCopy(std::uint32_t node, const ObjectId& id) = 0;
};

class ObjectTransfer {
 public:
  ObjectTransfer(std::uint32_t node_id, object::ObjectStore& store, TransferLinks& links);

  // The object's path in this node's store, pulled from `holder` first when
  // it lives elsewhere (once: a copy pulled earlier is reused).
  Result<std::string> MakeLocal(const ObjectId& id, std::uint32_t holder, std::uint64_t size);
  // Lends a local object to pull `pull` of `puller_node`; each call needs an
  // UnpinForPull of the same pull. An unpin that arrives first (the puller
  // gave up waiting for the pin) cancels the pin when it comes.
  Result<PullSource> PinForPull(const ObjectId& id, std::uint32_t puller_node, std::uint64_t pull);
  void UnpinForPull(const ObjectId& id, std::uint32_t puller_node, std::uint64_t pull);
  // Drops the pins of a lost node's pulls: it will never unpin them.
  void ForgetPuller(std::uint32_t puller_node);
  // Frees a local object and asks the nodes that pulled copies to free them.
  void FreeLocal(const ObjectId& id);
  // The store's FreeOwnedBy, and this node's record of who pulled copies of
  // those objects (each node frees its own copies: every node hears of an
  // ended owner).
  void FreeOwnedBy(const std::function<bool(std::uint64_t owner)>& owned);
  // Drops every registration (the node manager stops).
  void Clear();
  [[nodiscard]] std::size_t pinned_objects() const;

 private:
  // One pull of one node.
  struct PullKey {
    std::uint32_t node = 0;
    std::uint64_t pull = 0;
    auto operator<=>(const PullKey&) const = default;
  };
  struct PullRegistration {
    std::unique_ptr<object::MappedFile> file;
    TransferLinks::Registration registration;
    std::set<PullKey> pulls;  // the store pin is held while any remains
  };
  // Unpins that came before their pins, kept for the pins that may still
  // come; the oldest go beyond kCancelledPullsKept (a pin that failed at the
  // holder never comes).
  static constexpr std::size_t kCancelledPullsKept = 4096;

  void ReleaseLocked(std::map<ObjectId, PullRegistration>::iterator registration);

  const std::uint32_t node_id_;
  object::ObjectStore& store_;
  TransferLinks& links_;
  mutable std::mutex pulls_mutex_;
  std::map<ObjectId, PullRegistration> pull_sources_;   // guarded by pulls_mutex_
  std::map<ObjectId, std::set<std::uint32_t>> copies_;  // guarded by pulls_mutex_
  std::set<std::pair<ObjectId, PullKey>> cancelled_pulls_;    // guarded by pulls_mutex_
  std::deque<std::pair<ObjectId, PullKey>> cancelled_order_;  // guarded by pulls_mutex_
  std::mutex fetch_mutex_;                                    // one pull into this node at a time
  std::uint64_t next_pull_ = 0;                               // guarded by fetch_mutex_
};

}  // namespace sray::core
