#pragma once

// The caller's side of actors, in every process that creates or calls them.
// Calls go straight to the actor's worker (no node manager in between), as
// Ray's direct actor calls do. Per actor it keeps the calls in submission
// order and sends them in that order once their ObjectRef arguments are
// resolved (a call waiting for an argument holds back the calls after it),
// numbered per incarnation so the actor runs them in order even when
// messages overtake each other. When the actor's process dies, the head
// says whether it restarts (calls in flight are retried if their
// max_task_retries allow, else fail) or is dead (every call fails fast).
//
// The Owner keeps each call's result object and retries; this class only
// moves calls. Lock order: the owner's lock, then this one; this class never
// calls the owner while holding its lock.
//
// Thread-safety: every member may be called from any thread.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/actor_calls.h"
#include "core/head_service.h"
#include "core/protocol.h"
#include "sray/internal/contained_refs.h"
#include "sray/internal/runtime.h"
#include "transport/address_book.h"
#include "transport/transport.h"

namespace sray::core {

class Owner;

class ActorClient final : public ActorCalls {
 public:
  ActorClient(Owner& owner, HeadService& head, transport::Transport& transport,
              std::shared_ptr<transport::AddressBook> address_book, std::string hostname);
  ~ActorClient() override;
  ActorClient(const ActorClient&) = delete;
  ActorClient& operator=(const ActorClient&) = delete;

  // ActorCalls (core/actor_calls.h).
  internal::ActorId Create(const std::string& factory,
                           std::vector<internal::TaskArgument> arguments,
                           const internal::ActorOptions& options) override;
  std::optional<internal::NamedActor> FindNamed(const std::string& name) override;
  void Kill(internal::ActorId actor, bool no_restart) override;
  std::uint64_t CreatePlacementGroup(const std::string& name,
                                     const std::vector<std::map<std::string, double>>& bundles,
                                     PlacementStrategy strategy) override;
  internal::PlacementGroupState WaitPlacementGroup(std::uint64_t id,
                                                   internal::Timeout timeout) override;
  void RemovePlacementGroup(std::uint64_t id) override;
  void Enqueue(internal::ActorId actor, std::uint64_t task_id) override;
  void Send(TaskSpec spec) override;
  void Finished(internal::ActorId actor, std::uint64_t task_id) override;

  // Ignores replies from now on (shutdown).
  void Stop();

  // How many actors this process keeps an entry for: a dead actor's goes
  // once nothing is left to answer (memory checks in tests).
  [[nodiscard]] std::size_t KnownActors();

 private:
  enum class CallState { kWaitingArguments, kReady, kSent, kLost };
  struct Call {
    std::uint64_t task_id = 0;
    CallState state = CallState::kWaitingArguments;
    TaskSpec spec;
    std::int32_t sent_incarnation = -1;
    // The process it was sent to: where a lost call's result may lie.
    std::uint32_t sent_rank = 0;
    std::uint32_t sent_node = 0;
  };
  struct ActorEntry {
    // By task id, which the owner hands out in submission order.
    std::map<std::uint64_t, Call> calls;
    // Every call before this task id is sent (or gone): where a flush starts.
    std::uint64_t unsent_from = 0;
    std::size_t in_flight = 0;
    std::optional<ActorInfo> info;
    bool asking = false;  // a WaitForChange is outstanding (always, until dead)
    std::int32_t numbered_incarnation = -1;
    std::uint64_t next_sequence = 0;
    // References packed in the constructor's arguments: a restart runs the
    // constructor again, so they are held until the actor is dead.
    internal::ContainedRefs constructor_refs;
  };
  // What to do once the lock is released.
  struct Outgoing {
    internal::ActorId actor = 0;
    std::uint32_t rank = 0;
    std::uint64_t task_id = 0;
    std::int32_t incarnation = 0;
    std::shared_ptr<transport::Bytes> payload;
    // Other calls to this actor were in flight: the transport's progress
    // thread sends it, which batches sends under load.
    bool pipelined = false;
  };
  struct Actions {
    std::vector<Outgoing> sends;
    std::vector<TaskOutcome> failures;
    std::vector<std::pair<internal::ActorId, std::int32_t>> asks;
    internal::ContainedRefs released;  // dropped without the lock (they reach the Owner)
    // Results a lost call's process may have stored before it died.
    std::vector<OrphanedResult> orphans;
  };

  void FlushLocked(internal::ActorId actor, ActorEntry& entry, Actions& actions);
  void LearnLocked(ActorEntry& entry, const ActorInfo& info);
  void FailLostLocked(ActorEntry& entry, Actions& actions);
  void ForgetIfDoneLocked(std::unordered_map<internal::ActorId, ActorEntry>::iterator found);
  TaskOutcome LostOutcome(const ActorEntry& entry, const TaskSpec& spec) const;
  void Perform(Actions actions);
  void OnReply(std::uint32_t sender, TaskOutcome outcome);
  void OnInfo(internal::ActorId actor, Result<ActorInfo> info);
  std::string Label(internal::ActorId actor, const ActorEntry& entry) const;

  Owner& owner_;
  HeadService& head_;
  transport::Transport& transport_;
  std::shared_ptr<transport::AddressBook> address_book_;
  const std::string hostname_;
  std::string own_address_;  // sent with each incarnation's first call

  std::mutex mutex_;
  bool stopped_ = false;
  std::unordered_map<internal::ActorId, ActorEntry> actors_;
};

}  // namespace sray::core
