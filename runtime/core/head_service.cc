#include "core/head_service.h"

#include <condition_variable>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "common/deadline.h"

namespace sray::core {
namespace {

class LocalHead final : public HeadService {
 public:
  explicit LocalHead(ActorDirectory& directory) : directory_(directory) {}
  Result<ActorInfo> CreateActor(const ActorCreation& creation) override {
    return directory_.Create(creation);
  }
  Result<ActorInfo> LookupActor(const std::string& name) override {
    return directory_.Lookup(name);
  }
  void WaitForChange(const ActorWait& wait, std::function<void(Result<ActorInfo>)> done) override {
    directory_.WaitForChange(wait, std::move(done));
  }
  Status KillActor(const ActorKill& kill) override { return directory_.Kill(kill); }
  Result<PlacementGroupInfo> CreatePlacementGroup(const PlacementGroupCreation& creation) override {
    return directory_.CreatePlacementGroup(creation);
  }
  Result<PlacementGroupInfo> WaitPlacementGroup(std::uint64_t id,
                                                internal::Timeout timeout) override {
    struct Shared {
      std::mutex mutex;
      std::condition_variable changed;
      std::optional<PlacementGroupInfo> info;
    };
    auto shared = std::make_shared<Shared>();
    const bool block = !timeout || timeout->count() > 0;
    directory_.WaitPlacementGroup(PlacementGroupWait{.id = id, .block = block},
                                  [shared](PlacementGroupInfo info) {
                                    {
                                      std::lock_guard lock(shared->mutex);
                                      shared->info = std::move(info);
                                    }
                                    shared->changed.notify_all();
                                  });
    std::unique_lock lock(shared->mutex);
    if (!shared->changed.wait_until(lock, DeadlineAfter(timeout),
                                    [&] { return shared->info.has_value(); })) {
      PlacementGroupInfo pending;
      pending.id = id;
      return pending;
    }
    return *shared->info;
  }
  Status RemovePlacementGroup(std::uint64_t id) override {
    return directory_.RemovePlacementGroup(id);
  }

 private:
  ActorDirectory& directory_;
};

class RemoteHead final : public HeadService {
 public:
  RemoteHead(transport::Transport& transport, std::uint32_t head_rank, Caller self)
      : transport_(transport), head_rank_(head_rank), self_(self) {
    transport_.RegisterOneWayHandler(kActorChanged, [this](std::uint32_t, auto payload) {
      auto changed = Decode<ActorChanged>(payload, "actor change");
      if (changed.ok()) Deliver(std::move(changed).value());
    });
  }

  Result<ActorInfo> CreateActor(const ActorCreation& creation) override {
    return Ask<ActorInfo>(kCreateActor, Encode(creation), "actor info");
  }
  Result<ActorInfo> LookupActor(const std::string& name) override {
    return Ask<ActorInfo>(kLookupActor, Encode(ActorLookup{.name = name}), "actor info");
  }
  // One question per actor at a time (the ActorClient asks so): a newer one
  // replaces the older.
  void WaitForChange(const ActorWait& wait, std::function<void(Result<ActorInfo>)> done) override {
    {
      std::lock_guard lock(mutex_);
      waiting_[wait.id] = std::move(done);
    }
    ActorWait addressed = wait;
    addressed.caller_rank = self_.rank;
    addressed.caller_node = self_.node;
    transport_.Post(head_rank_, kWaitActorChange, Encode(addressed));
  }
  Status KillActor(const ActorKill& kill) override {
    auto reply = transport_.Call(head_rank_, kKillActor, Encode(kill));
    return reply.ok() ? Status::Ok() : reply.status();
  }
  Result<PlacementGroupInfo> CreatePlacementGroup(const PlacementGroupCreation& creation) override {
    return Ask<PlacementGroupInfo>(kCreatePlacementGroup, Encode(creation), "placement group");
  }
  // Polls: a request left waiting at the head would be answered on a
  // connection that may be gone by then.
  Result<PlacementGroupInfo> WaitPlacementGroup(std::uint64_t id,
                                                internal::Timeout timeout) override {
    const auto deadline = DeadlineAfter(timeout);
    const auto payload = Encode(PlacementGroupWait{.id = id, .block = false});
    while (true) {
      auto reply = transport_.Call(head_rank_, kWaitPlacementGroup, payload);
      if (!reply.ok()) return reply.status();
      auto info = Decode<PlacementGroupInfo>(*reply, "placement group");
      if (!info.ok() || info->placed || info->removed ||
          std::chrono::steady_clock::now() >= deadline) {
        return info;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  Status RemovePlacementGroup(std::uint64_t id) override {
    auto reply =
        transport_.Call(head_rank_, kRemovePlacementGroup, Encode(PlacementGroupRemoval{.id = id}));
    return reply.ok() ? Status::Ok() : reply.status();
  }

 private:
  void Deliver(ActorChanged changed) {
    std::function<void(Result<ActorInfo>)> done;
    {
      std::lock_guard lock(mutex_);
      auto found = waiting_.find(changed.id);
      if (found == waiting_.end()) return;
      done = std::move(found->second);
      waiting_.erase(found);
    }
    if (changed.found) {
      done(std::move(changed.info));
    } else {
      done(Status::NotFound(changed.error));
    }
  }

  template <typename Message>
  Result<Message> Ask(std::uint32_t method, const transport::Bytes& payload, const char* what) {
    auto reply = transport_.Call(head_rank_, method, payload);
    if (!reply.ok()) return reply.status();
    return Decode<Message>(*reply, what);
  }

  transport::Transport& transport_;
  const std::uint32_t head_rank_;
  const Caller self_;
  std::mutex mutex_;
  std::unordered_map<std::uint64_t, std::function<void(Result<ActorInfo>)>> waiting_;
};

}  // namespace

std::unique_ptr<HeadService> MakeLocalHead(ActorDirectory& directory) {
  return std::make_unique<LocalHead>(directory);
}

std::unique_ptr<HeadService> MakeRemoteHead(transport::Transport& transport,
                                            std::uint32_t head_rank, Caller self) {
  return std::make_unique<RemoteHead>(transport, head_rank, self);
}

}  // namespace sray::core
