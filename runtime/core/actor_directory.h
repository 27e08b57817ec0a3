#pragma once

// The head's actor directory (Ray's GCS actor and placement-group managers),
// in the driver process: every actor's options, state, incarnation and
// location; job-wide names; where each actor and each placement-group bundle
// is placed; restarts after a death; kills. Node managers report
// constructors that finished and actor processes that died; callers ask for
// an actor's location and wait for it to change.
//
// Placement: an actor holds its resources on one node for its lifetime. The
// directory counts what actors and bundles hold per node, and places a new
// actor on a node with room, preferring the node with the fewest actors (so
// actors without resources spread over the job). An actor that does not fit
// anywhere now waits here until a kill, a death or a removed group frees
// room; one that could never fit is refused at once.
//
// Thread-safety: every member may be called from any thread, including
// transport handlers; none blocks. Callbacks run without the directory's
// lock, on the thread that caused the change.

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/event_log.h"
#include "core/protocol.h"
#include "sched/resources.h"
#include "transport/transport.h"

namespace sray::core {

class ActorDirectory {
 public:
  struct Hooks {
    // Hands a constructor to node `node`'s manager (not to be moved on).
    std::function<void(std::uint32_t node, TaskSpec spec)> submit_to_node;
    // Tells node `node`'s manager to end an actor's process.
    std::function<void(std::uint32_t node, ActorKill kill)> stop_worker;
    // Hands an answer to a waiting caller on node `node` (through that
    // node's manager, which drops it if the caller is gone).
    std::function<void(std::uint32_t node, ActorChanged changed)> notify;
  };
  using InfoCallback = std::function<void(Result<ActorInfo>)>;
  using GroupCallback = std::function<void(PlacementGroupInfo)>;

  ActorDirectory(std::vector<NodeDescription> nodes, std::uint32_t head_rank, Hooks hooks);
  ActorDirectory(const ActorDirectory&) = delete;
  ActorDirectory& operator=(const ActorDirectory&) = delete;

  Result<ActorInfo> Create(ActorCreation creation);
  Result<ActorInfo> Lookup(const std::string& name);
  // `done` runs once the actor is alive in an incarnation after wait.seen,
  // or dead (maybe at once).
  void WaitForChange(ActorWait wait, InfoCallback done);
  Status Kill(const ActorKill& kill);
  void OnCreated(TaskOutcome outcome);
  void OnWorkerDied(const ActorDeath& death);
  // The head lost `node`: nothing is placed there again, and each actor it
  // hosted restarts elsewhere (within max_restarts) or dies with `cause`.
  // Bundles of placement groups there are lost with it (the groups are not
  // laid out again); an actor whose bundles are all lost dies.
  void OnNodeLost(std::uint32_t node, const std::string& cause);

  Result<PlacementGroupInfo> CreatePlacementGroup(const PlacementGroupCreation& creation);
  // `done` runs once the group is placed or removed (at once when block is
  // false). Remote callers ask with block=false and poll.
  void WaitPlacementGroup(const PlacementGroupWait& wait, GroupCallback done);
  Status RemovePlacementGroup(std::uint64_t id);

  // What the dashboard shows, copied under the lock.
  struct ActorView {
    ActorInfo info;
    std::int32_t restarts = 0;
    std::int32_t max_restarts = 0;
    ResourceMap resources;
    std::uint64_t placement_group = 0;
  };
  struct PlacementGroupView {
    PlacementGroupInfo info;
    std::string name;
    PlacementStrategy strategy = PlacementStrategy::kPack;
    std::vector<ResourceMap> bundles;
  };
  // At most `limit` actors, the newest; `total` is told how many there are.
  [[nodiscard]] std::vector<ActorView> Actors(std::size_t limit, std::size_t& total);
  [[nodiscard]] std::vector<PlacementGroupView> PlacementGroups(std::size_t limit,
                                                                std::size_t& total);
  // Actors restarted and died, placement groups removed.
  [[nodiscard]] const EventLog& events() const { return events_; }

  // Serves the requests above to the other processes of the job.
  void RegisterHandlers(transport::Transport& transport);
  // Drops every waiting callback: at shutdown, before the transport goes.
  void DropWaiters();

 private:
  struct Waiter {
    std::int32_t seen = -1;
    InfoCallback done;
  };
  struct ActorRecord {
    ActorCreation creation;
    ActorInfo info;
    std::int32_t restarts = 0;
    bool placed = false;       // holds resources on info.node
    std::int32_t bundle = -1;  // bundle of its group it draws from
    std::vector<Waiter> waiters;
  };
  struct Bundle {
    sched::ResourceMap total;
    sched::ResourceMap free;  // not yet used by actors placed in it
    std::uint32_t node = 0;
  };
  struct Group {
    PlacementGroupCreation creation;
    std::vector<Bundle> bundles;
    bool placed = false;
    bool removed = false;
    std::vector<GroupCallback> waiters;
  };
  // Work to do once the lock is released.
  struct Effects {
    std::vector<std::pair<std::uint32_t, TaskSpec>> submissions;
    std::vector<std::pair<std::uint32_t, ActorKill>> stops;
    std::vector<std::pair<InfoCallback, ActorInfo>> infos;
    std::vector<std::pair<GroupCallback, PlacementGroupInfo>> groups;
    std::vector<std::pair<std::string, std::string>> events;  // kind, message
  };

  // Locked helpers.
  [[nodiscard]] bool FitsNode(std::uint32_t node, const sched::ResourceMap& request) const;
  [[nodiscard]] bool FitsTotal(std::uint32_t node, const sched::ResourceMap& request) const;
  [[nodiscard]] std::string Feasibility(const ActorCreation& creation) const;  // empty: feasible
  bool TryPlace(ActorRecord& record, Effects& effects);
  void Release(ActorRecord& record);
  void PlacePending(Effects& effects);
  bool TryPlaceGroup(Group& group);
  void MarkDead(ActorRecord& record, std::string cause, Effects& effects);
  // Drops the oldest dead records beyond kDeadActorsKept.
  void ForgetOldDeadLocked();
  // Why `id` has no record: forgotten after its death, or never made here.
  [[nodiscard]] std::string UnknownActorLocked(std::uint64_t id) const;
  // Its process is gone (`where` says how): restart within max_restarts, or dead.
  void LoseIncarnation(ActorRecord& record, const std::string& where, Effects& effects);
  // False when every bundle the actor may use is on a lost node.
  [[nodiscard]] bool HasLiveBundle(const ActorCreation& creation) const;
  void Notify(ActorRecord& record, Effects& effects);
  [[nodiscard]] PlacementGroupInfo GroupInfo(std::uint64_t id, const Group& group) const;
  void Run(Effects& effects);

  const std::vector<NodeDescription> nodes_;
  const std::uint32_t head_rank_;
  const Hooks hooks_;
  EventLog events_;

  std::mutex mutex_;
  std::uint64_t next_actor_ = 1;
  std::uint64_t next_task_ = 1;
  std::uint64_t next_group_ = 1;
  std::map<std::uint64_t, ActorRecord> actors_;
  // Dead actors' records, oldest first: a job that makes actors all day must
  // not grow the head without bound (the 30-minute soak, one actor made and
  // killed a round, grew the driver's process by 22 MiB an hour). The newest
  // kDeadActorsKept stay, to answer a late call with the cause; older ones
  // are forgotten (a call then hears that it died long ago). A dead record
  // still costs about 0.6 KiB (name, class, resources, cause): 1,000 of them
  // fill within minutes of such a job and then stay at about 0.6 MiB, where
  // 10,000 grew the 30-minute soak's driver for its whole run.
  static constexpr std::size_t kDeadActorsKept = 1'000;
  std::deque<std::uint64_t> dead_;
  std::size_t forgotten_ = 0;
  std::map<std::string, std::uint64_t> names_;
  std::deque<std::uint64_t> unplaced_;    // actors waiting for room, oldest first
  std::vector<sched::ResourceMap> held_;  // per node: actors and bundles
  std::vector<std::uint32_t> actor_count_;
  std::vector<bool> lost_;  // per node
  std::map<std::uint64_t, Group> groups_;
};

}  // namespace sray::core
