#include "core/head_service.h"

#include <condition_variable>
#include <mutex>

namespace sray::core {
namespace {

constexpr auto kForever = std::chrono::hours(24 * 365);

class LocalHead final : public HeadService {
 public:
  explicit LocalHead(ActorDirectory& directory) : directory_(directory) {}
  Result<ActorInfo> CreateActor(const ActorCreation& creation) override {
    return directory_.Create(creation);
  }
  Result<ActorInfo> LookupActor(const std::string& name) override { return directory_.Lookup(name); }
  void WaitForChange(const ActorWait& wait, std::function<void(Result<ActorInfo>)> done) override {
    directory_.WaitForChange(wait, std::move(done));
  }
  Status KillActor(const ActorKill& kill) override { return directory_.Kill(kill); }
  Result<PlacementGroupInfo> CreatePlacementGroup(const PlacementGroupCreation& creation) override {
    return directory_.CreatePlacementGroup(creation);
  }
  Result<PlacementGroupInfo> WaitPlacementGroup(std::uint64_t id, internal::Timeout timeout) override {
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
    if (!shared->changed.wait_for(lock, timeout.value_or(kForever), [&] { return shared->info.has_value(); })) {
      PlacementGroupInfo pending;
      pending.id = id;
      return pending;
    }
    return *shared->info;
  }
  Status RemovePlacementGroup(std::uint64_t id) override { return directory_.RemovePlacementGroup(id); }

 private:
  ActorDirectory& directory_;
};

class RemoteHead final : public HeadService {
 public:
  RemoteHead(transport::Transport& transport, std::uint32_t head_rank)
      : transport_(transport), head_rank_(head_rank) {}

  Result<ActorInfo> CreateActor(const ActorCreation& creation) override {
    return Ask<ActorInfo>(kCreateActor, Encode(creation), "actor info");
  }
  Result<ActorInfo> LookupActor(const std::string& name) override {
    return Ask<ActorInfo>(kLookupActor, Encode(ActorLookup{.name = name}), "actor info");
  }
  void WaitForChange(const ActorWait& wait, std::function<void(Result<ActorInfo>)> done) override {
    auto payload = std::make_shared<transport::Bytes>(Encode(wait));
    transport_.CallAsync(head_rank_, kWaitActorChange, *payload,
                         [payload, done = std::move(done)](Result<transport::Bytes> reply) {
                           if (!reply.ok()) {
                             done(reply.status());
                             return;
                           }
                           done(Decode<ActorInfo>(*reply, "actor info"));
                         });
  }
  Status KillActor(const ActorKill& kill) override {
    auto reply = transport_.Call(head_rank_, kKillActor, Encode(kill));
    return reply.ok() ? Status::Ok() : reply.status();
  }
  Result<PlacementGroupInfo> CreatePlacementGroup(const PlacementGroupCreation& creation) override {
    return Ask<PlacementGroupInfo>(kCreatePlacementGroup, Encode(creation), "placement group");
  }
  Result<PlacementGroupInfo> WaitPlacementGroup(std::uint64_t id, internal::Timeout timeout) override {
    const bool block = !timeout || timeout->count() > 0;
    auto reply = transport_.Call(head_rank_, kWaitPlacementGroup,
                                 Encode(PlacementGroupWait{.id = id, .block = block}),
                                 block ? timeout.value_or(kForever) : std::chrono::milliseconds(60000));
    if (!reply.ok()) {
      if (reply.status().code() != StatusCode::kDeadlineExceeded) return reply.status();
      PlacementGroupInfo pending;
      pending.id = id;
      return pending;
    }
    return Decode<PlacementGroupInfo>(*reply, "placement group");
  }
  Status RemovePlacementGroup(std::uint64_t id) override {
    auto reply = transport_.Call(head_rank_, kRemovePlacementGroup, Encode(PlacementGroupWait{.id = id, .block = false}));
    return reply.ok() ? Status::Ok() : reply.status();
  }

 private:
  template <typename Message>
  Result<Message> Ask(std::uint32_t method, const transport::Bytes& payload, const char* what) {
    auto reply = transport_.Call(head_rank_, method, payload);
    if (!reply.ok()) return reply.status();
    return Decode<Message>(*reply, what);
  }

  transport::Transport& transport_;
  const std::uint32_t head_rank_;
};

}  // namespace

std::unique_ptr<HeadService> MakeLocalHead(ActorDirectory& directory) {
  return std::make_unique<LocalHead>(directory);
}

std::unique_ptr<HeadService> MakeRemoteHead(transport::Transport& transport, std::uint32_t head_rank) {
  return std::make_unique<RemoteHead>(transport, head_rank);
}

}  // namespace sray::core
