#include "core/actor_directory.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "cpu_node.h"

namespace sray::core {
namespace {

ActorCreation Creation(ResourceMap resources = {}, std::string name = {},
                       std::int32_t max_restarts = 0, std::uint64_t placement_group = 0,
                       std::int32_t bundle_index = -1) {
  ActorCreation creation;
  creation.factory = "C::Create";
  creation.name = std::move(name);
  creation.resources = std::move(resources);
  creation.max_restarts = max_restarts;
  creation.placement_group = placement_group;
  creation.bundle_index = bundle_index;
  return creation;
}

ActorKill KillFor(std::uint64_t id) {
  return ActorKill{.id = id, .no_restart = true, .incarnation = 0};
}

TaskOutcome Created(const TaskSpec& spec, std::uint32_t node) {
  TaskOutcome outcome = FailedOutcome(spec, OutcomeKind::kInlineValue, "");
  outcome.node = node;
  outcome.worker_rank = 1000 + static_cast<std::uint32_t>(spec.actor_id);
  outcome.pid = 4000 + static_cast<std::int64_t>(spec.actor_id);
  return outcome;
}

class ActorDirectoryTest : public ::testing::Test {
 protected:
  ActorDirectory directory_{
      {CpuNode(0, 2), CpuNode(1, 2), CpuNode(2, 2)},
      0,
      ActorDirectory::Hooks{
          .submit_to_node = [this](
                                std::uint32_t node,
                                TaskSpec spec) { submitted_.emplace_back(node, std::move(spec)); },
          .stop_worker = [this](std::uint32_t node,
                                ActorKill kill) { stopped_.emplace_back(node, kill); },
          .notify = [](std::uint32_t, ActorChanged) {}}};
  std::vector<std::pair<std::uint32_t, TaskSpec>> submitted_;
  std::vector<std::pair<std::uint32_t, ActorKill>> stopped_;

  ActorInfo Create(ActorCreation creation) {
    auto info = directory_.Create(std::move(creation));
    EXPECT_TRUE(info.ok()) << info.status().message();
    return info.ok() ? *info : ActorInfo{};
  }
  // Runs the constructor that was submitted last, successfully.
  void ConstructLast() {
    ASSERT_FALSE(submitted_.empty());
    directory_.OnCreated(Created(submitted_.back().second, submitted_.back().first));
  }
  // The change answered at once, if any. A waiter left unanswered stays
  // registered and may run later: it writes into memory of its own (a local
  // here was written after this returned: ASan's stack-use-after-scope).
  std::optional<ActorInfo> Changed(std::uint64_t id, std::int32_t seen) {
    auto result = std::make_shared<std::optional<ActorInfo>>();
    directory_.WaitForChange(ActorWait{.id = id, .seen = seen}, [result](Result<ActorInfo> info) {
      if (info.ok()) *result = *info;
    });
    return *result;
  }
};

TEST_F(ActorDirectoryTest, ActorsWithoutResourcesSpreadOverTheNodes) {
  std::set<std::uint32_t> nodes;
  for (int index = 0; index < 6; ++index) {
    Create(Creation());
    nodes.insert(submitted_.back().first);
  }
  EXPECT_EQ(nodes.size(), 3u);
}

TEST_F(ActorDirectoryTest, AnActorWaitsForHeldResourcesUntilAKillFreesThem) {
  std::vector<ActorInfo> holders;
  for (int index = 0; index < 3; ++index) {
    holders.push_back(Create(Creation({{"CPU", 2}})));
  }
  ASSERT_EQ(submitted_.size(), 3u);
  const ActorInfo waiting = Create(Creation({{"CPU", 2}}));
  EXPECT_EQ(submitted_.size(), 3u) << "placed although every CPU is held";
  ASSERT_TRUE(directory_.Kill(KillFor(holders[1].id)).ok());
  ASSERT_EQ(submitted_.size(), 4u);
  EXPECT_EQ(submitted_.back().second.actor_id, waiting.id);
  EXPECT_EQ(submitted_.back().first, submitted_[1].first) << "placed where the killed actor was";
  ASSERT_EQ(stopped_.size(), 1u);
  EXPECT_EQ(stopped_.front().second.id, holders[1].id);
}

TEST_F(ActorDirectoryTest, ARequestNoNodeCanHoldIsRefusedAtOnce) {
  auto info = directory_.Create(Creation({{"CPU", 3}}));
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(info.status().message().find("CPU"), std::string::npos);
}

TEST_F(ActorDirectoryTest, NamesAreUniqueAndFreedWhenTheActorDies) {
  const ActorInfo first = Create(Creation({}, "cache"));
  auto second = directory_.Create(Creation({}, "cache"));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kAlreadyExists);
  ASSERT_TRUE(directory_.Lookup("cache").ok());
  ASSERT_TRUE(directory_.Kill(KillFor(first.id)).ok());
  EXPECT_EQ(directory_.Lookup("cache").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(directory_.Create(Creation({}, "cache")).ok());
}

TEST_F(ActorDirectoryTest, ADeathRestartsUpToMaxRestartsThenTheActorIsDead) {
  const ActorInfo actor = Create(Creation({}, "", 1));
  ConstructLast();
  auto alive = Changed(actor.id, -1);
  ASSERT_TRUE(alive.has_value());
  EXPECT_EQ(static_cast<ActorState>(alive->state), ActorState::kAlive);
  EXPECT_FALSE(Changed(actor.id, 0).has_value()) << "no change yet";

  std::optional<ActorInfo> seen_by_waiter;
  directory_.WaitForChange(ActorWait{.id = actor.id, .seen = 0},
                           [&](Result<ActorInfo> info) { seen_by_waiter = *info; });
  directory_.OnWorkerDied(ActorDeath{
      .id = actor.id, .incarnation = 0, .node = 0, .pid = 1, .cause = "ended with signal 9"});
  ASSERT_EQ(submitted_.size(), 2u) << "the constructor runs again";
  EXPECT_EQ(submitted_.back().second.incarnation, 1);
  EXPECT_FALSE(seen_by_waiter.has_value()) << "answered before the new incarnation is alive";
  ConstructLast();
  ASSERT_TRUE(seen_by_waiter.has_value());
  EXPECT_EQ(seen_by_waiter->incarnation, 1);

  directory_.OnWorkerDied(ActorDeath{
      .id = actor.id, .incarnation = 1, .node = 0, .pid = 2, .cause = "ended with signal 9"});
  auto dead = Changed(actor.id, 1);
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(static_cast<ActorState>(dead->state), ActorState::kDead);
  EXPECT_NE(dead->cause.find("no restart left"), std::string::npos) << dead->cause;
  EXPECT_EQ(submitted_.size(), 3u - 1u) << "no third constructor";
}

TEST_F(ActorDirectoryTest, AConstructorThatThrowsLeavesTheActorDeadWithItsMessage) {
  const ActorInfo actor = Create(Creation({}, "", 3));
  TaskOutcome threw =
      FailedOutcome(submitted_.back().second, OutcomeKind::kTaskThrew, "no database");
  threw.error_type = "std::invalid_argument";
  directory_.OnCreated(threw);
  auto dead = Changed(actor.id, -1);
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(static_cast<ActorState>(dead->state), ActorState::kDead);
  EXPECT_NE(dead->cause.find("std::invalid_argument: no database"), std::string::npos)
      << dead->cause;
}

TEST_F(ActorDirectoryTest, AConstructorFinishingAfterAKillEndsItsProcess) {
  const ActorInfo actor = Create(Creation());
  const TaskSpec constructor = submitted_.back().second;
  ASSERT_TRUE(directory_.Kill(KillFor(actor.id)).ok());
  stopped_.clear();
  directory_.OnCreated(Created(constructor, 0));
  ASSERT_EQ(stopped_.size(), 1u);
  EXPECT_EQ(stopped_.front().second.id, actor.id);
}

TEST_F(ActorDirectoryTest, SpreadPutsBundlesOnDifferentNodesAndPackOnOne) {
  auto spread = directory_.CreatePlacementGroup(
      PlacementGroupCreation{.name = "",
                             .bundles = {{{"CPU", 1}}, {{"CPU", 1}}, {{"CPU", 1}}},
                             .strategy = PlacementStrategy::kSpread});
  ASSERT_TRUE(spread.ok());
  ASSERT_TRUE(spread->placed);
  EXPECT_EQ(
      std::set<std::uint32_t>(spread->bundle_nodes.begin(), spread->bundle_nodes.end()).size(), 3u);
  auto pack = directory_.CreatePlacementGroup(
      PlacementGroupCreation{.name = "",
                             .bundles = {{{"CPU", 0.5}}, {{"CPU", 0.5}}},
                             .strategy = PlacementStrategy::kPack});
  ASSERT_TRUE(pack.ok());
  ASSERT_TRUE(pack->placed);
  EXPECT_EQ(pack->bundle_nodes[0], pack->bundle_nodes[1]);
}

TEST_F(ActorDirectoryTest, AStrictSpreadGroupWaitsUntilRemovingAnotherFreesNodes) {
  auto first = directory_.CreatePlacementGroup(
      PlacementGroupCreation{.name = "",
                             .bundles = {{{"CPU", 2}}, {{"CPU", 2}}, {{"CPU", 2}}},
                             .strategy = PlacementStrategy::kStrictSpread});
  ASSERT_TRUE(first.ok() && first->placed);
  auto second = directory_.CreatePlacementGroup(
      PlacementGroupCreation{.name = "",
                             .bundles = {{{"CPU", 1}}, {{"CPU", 1}}},
                             .strategy = PlacementStrategy::kStrictSpread});
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->placed);
  std::optional<PlacementGroupInfo> placed;
  directory_.WaitPlacementGroup(PlacementGroupWait{.id = second->id, .block = true},
                                [&](PlacementGroupInfo info) { placed = info; });
  EXPECT_FALSE(placed.has_value());
  ASSERT_TRUE(directory_.RemovePlacementGroup(first->id).ok());
  ASSERT_TRUE(placed.has_value());
  EXPECT_TRUE(placed->placed);
}

// Three nodes of 2 CPUs. STRICT_PACK puts every bundle on one node. When no
// node holds them all, it waits, where PACK would spread them.
TEST_F(ActorDirectoryTest, AStrictPackGroupIsOnOneNodeOrWaitsForOne) {
  auto together = directory_.CreatePlacementGroup(
      PlacementGroupCreation{.name = "",
                             .bundles = {{{"CPU", 1}}, {{"CPU", 1}}},
                             .strategy = PlacementStrategy::kStrictPack});
  ASSERT_TRUE(together.ok() && together->placed);
  EXPECT_EQ(together->bundle_nodes[0], together->bundle_nodes[1]);
  // One CPU on each of two nodes, so no node has two free.
  auto blockers = directory_.CreatePlacementGroup(
      PlacementGroupCreation{.name = "",
                             .bundles = {{{"CPU", 1}}, {{"CPU", 1}}},
                             .strategy = PlacementStrategy::kStrictSpread});
  ASSERT_TRUE(blockers.ok() && blockers->placed);
  const std::vector<std::map<std::string, double>> pair = {{{"CPU", 1}}, {{"CPU", 1}}};
  auto waiting = directory_.CreatePlacementGroup(
      PlacementGroupCreation{.name = "", .bundles = pair, .strategy = PlacementStrategy::kStrictPack});
  ASSERT_TRUE(waiting.ok());
  EXPECT_FALSE(waiting->placed) << "STRICT_PACK split its bundles over nodes";
  auto packed = directory_.CreatePlacementGroup(
      PlacementGroupCreation{.name = "", .bundles = pair, .strategy = PlacementStrategy::kPack});
  ASSERT_TRUE(packed.ok() && packed->placed) << "PACK spreads when no node holds the group";
  EXPECT_NE(packed->bundle_nodes[0], packed->bundle_nodes[1]);
  std::optional<PlacementGroupInfo> placed;
  directory_.WaitPlacementGroup(PlacementGroupWait{.id = waiting->id, .block = true},
                                [&](PlacementGroupInfo info) { placed = info; });
  EXPECT_FALSE(placed.has_value());
  ASSERT_TRUE(directory_.RemovePlacementGroup(together->id).ok());
  ASSERT_TRUE(placed.has_value());
  ASSERT_TRUE(placed->placed);
  EXPECT_EQ(placed->bundle_nodes[0], placed->bundle_nodes[1]);
}

// A lost node: its actors restart on the other nodes (within max_restarts)
// or die naming the node, actors elsewhere are untouched, an actor whose
// bundle was there dies, nothing is placed there again, and the loss is an
// event.
TEST_F(ActorDirectoryTest, ALostNodesActorsRestartElsewhereOrDieAndNothingGoesThereAgain) {
  std::map<std::uint32_t, std::vector<ActorInfo>> by_node;
  for (int index = 0; index < 6; ++index) {
    const ActorInfo actor = Create(Creation({}, "", index % 2));  // every other may restart once
    by_node[submitted_.back().first].push_back(actor);
    ConstructLast();
  }
  ASSERT_EQ(by_node[2].size(), 2u);
  auto group = directory_.CreatePlacementGroup(
      PlacementGroupCreation{.name = "",
                             .bundles = {{{"CPU", 1}}, {{"CPU", 1}}, {{"CPU", 1}}},
                             .strategy = PlacementStrategy::kStrictSpread});
  ASSERT_TRUE(group.ok() && group->placed);
  std::int32_t bundle_on_2 = 0;
  for (std::int32_t index = 0; index < 3; ++index) {
    if (group->bundle_nodes[static_cast<std::size_t>(index)] == 2) bundle_on_2 = index;
  }
  const ActorInfo in_bundle = Create(Creation({{"CPU", 1}}, "", 3, group->id, bundle_on_2));
  ConstructLast();
  const std::size_t before = submitted_.size();

  directory_.OnNodeLost(2, "rank 2 is unreachable");
  std::size_t restarted = 0;
  for (const ActorInfo& actor : by_node[2]) {
    auto now = Changed(actor.id, 0);
    if (actor.id % 2 == 0) {
      EXPECT_FALSE(now.has_value()) << "restarting: answered once the new incarnation is alive";
    } else {
      ASSERT_TRUE(now.has_value());
      EXPECT_EQ(static_cast<ActorState>(now->state), ActorState::kDead);
      EXPECT_NE(now->cause.find("its node 2 was lost (rank 2 is unreachable); no restart left"), std::string::npos)
          << now->cause;
    }
  }
  for (std::size_t index = before; index < submitted_.size(); ++index) {
    EXPECT_NE(submitted_[index].first, 2u) << "a constructor was sent to the lost node";
    ++restarted;
  }
  std::size_t may_restart = 0;
  for (const ActorInfo& actor : by_node[2]) may_restart += actor.id % 2 == 0 ? 1 : 0;
  EXPECT_EQ(restarted, may_restart) << "only the actors of node 2 with a restart left start again";
  auto bundled = Changed(in_bundle.id, 0);
  ASSERT_TRUE(bundled.has_value());
  EXPECT_EQ(static_cast<ActorState>(bundled->state), ActorState::kDead);
  EXPECT_NE(bundled->cause.find("bundles are all on lost nodes"), std::string::npos) << bundled->cause;
  for (const auto& [node, actors] : by_node) {
    if (node == 2) continue;
    for (const ActorInfo& actor : actors) EXPECT_FALSE(Changed(actor.id, 0).has_value()) << "actor " << actor.id;
  }
  for (int index = 0; index < 4; ++index) {
    Create(Creation());
    EXPECT_NE(submitted_.back().first, 2u);
  }
  auto refused = directory_.Create(Creation({{"CPU", 1}}, "", 0, group->id, bundle_on_2));
  ASSERT_FALSE(refused.ok()) << "an actor would wait for ever for a bundle on the lost node";
  EXPECT_NE(refused.status().message().find("all on lost nodes"), std::string::npos) << refused.status().message();
  const auto events = directory_.events().Recent();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front().kind, "node_lost");
  EXPECT_NE(events.front().message.find("node 2 (n2) was lost: rank 2 is unreachable"), std::string::npos)
      << events.front().message;
}

TEST_F(ActorDirectoryTest, AnActorInABundleRunsOnTheBundlesNode) {
  auto group = directory_.CreatePlacementGroup(
      PlacementGroupCreation{.name = "",
                             .bundles = {{{"CPU", 1}}, {{"CPU", 1}}, {{"CPU", 1}}},
                             .strategy = PlacementStrategy::kSpread});
  ASSERT_TRUE(group.ok() && group->placed);
  for (std::int32_t index = 0; index < 3; ++index) {
    Create(Creation({{"CPU", 1}}, "", 0, group->id, index));
    EXPECT_EQ(submitted_.back().first, group->bundle_nodes[static_cast<std::size_t>(index)]);
  }
  auto too_big = directory_.Create(Creation({{"CPU", 2}}, "", 0, group->id, 0));
  EXPECT_EQ(too_big.status().code(), StatusCode::kResourceExhausted);
}

TEST_F(ActorDirectoryTest, RestartsDeathsAndRemovedGroupsAreEventsAndViewsListThem) {
  const ActorInfo actor = Create(Creation({}, "keeper", 1));
  ConstructLast();
  directory_.OnWorkerDied(ActorDeath{
      .id = actor.id, .incarnation = 0, .node = 0, .pid = 11, .cause = "ended with signal 9"});
  ConstructLast();
  directory_.OnWorkerDied(ActorDeath{
      .id = actor.id, .incarnation = 1, .node = 0, .pid = 12, .cause = "ended with signal 9"});
  auto group = directory_.CreatePlacementGroup(
      PlacementGroupCreation{.name = "pair",
                             .bundles = {{{"CPU", 1}}, {{"CPU", 1}}},
                             .strategy = PlacementStrategy::kSpread});
  ASSERT_TRUE(group.ok()) << group.status().message();
  ASSERT_TRUE(directory_.RemovePlacementGroup(group->id).ok());

  const auto events = directory_.events().Recent();
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].kind, "actor_restarted");
  EXPECT_NE(events[0].message.find("actor " + std::to_string(actor.id) + " 'keeper' (C::Create)"),
            std::string::npos)
      << events[0].message;
  EXPECT_NE(events[0].message.find("pid 11"), std::string::npos) << events[0].message;
  EXPECT_EQ(events[1].kind, "actor_died");
  EXPECT_NE(events[1].message.find("no restart left"), std::string::npos) << events[1].message;
  EXPECT_EQ(events[2].kind, "placement_group_removed");
  EXPECT_NE(events[2].message.find("'pair'"), std::string::npos) << events[2].message;

  (void)Create(Creation({}, "", 0));
  std::size_t total = 0;
  const auto newest = directory_.Actors(1, total);
  EXPECT_EQ(total, 2u);
  ASSERT_EQ(newest.size(), 1u);
  EXPECT_NE(newest[0].info.id, actor.id) << "the newest is listed first when the list is cut";
  const auto all = directory_.Actors(10, total);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].info.name, "keeper");
  EXPECT_EQ(all[0].restarts, 1);
  EXPECT_EQ(all[0].max_restarts, 1);
  EXPECT_EQ(static_cast<ActorState>(all[0].info.state), ActorState::kDead);
  const auto groups = directory_.PlacementGroups(10, total);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].name, "pair");
  EXPECT_TRUE(groups[0].info.removed);
  EXPECT_EQ(groups[0].bundles.size(), 2u);
}

}  // namespace
}  // namespace sray::core

namespace sray::core {
namespace {

// A job that makes and kills actors all day keeps a bounded head: dead
// actors' arguments and addresses go at once, and beyond the newest 10,000
// dead ones the oldest records are forgotten (the 30-minute soak grew the
// driver's process by 22 MiB an hour without this).
TEST_F(ActorDirectoryTest, DeadActorsShedTheirArgumentsAndOnlyTheNewestAreKept) {
  ActorCreation with_arguments = Creation();
  with_arguments.arguments.push_back(ArgumentSpec{});
  const ActorInfo first = Create(with_arguments);
  ConstructLast();
  ASSERT_TRUE(directory_.Kill(KillFor(first.id)).ok());
  const auto dead = Changed(first.id, -1);
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(static_cast<ActorState>(dead->state), ActorState::kDead);
  EXPECT_TRUE(dead->worker_address.empty());

  constexpr std::size_t kMade = 1'005;
  ActorInfo last;
  for (std::size_t index = 1; index < kMade; ++index) {
    last = Create(Creation());
    ASSERT_TRUE(directory_.Kill(KillFor(last.id)).ok());
  }
  (void)Create(Creation());  // a creation forgets the oldest beyond the newest 1,000 dead
  // The first dead actors are forgotten: a late call hears the head does not
  // know them (its calls then fail); the newest still answer with the cause.
  bool unknown = false;
  std::string why;
  directory_.WaitForChange(ActorWait{.id = first.id, .seen = -1}, [&](Result<ActorInfo> info) {
    unknown = !info.ok() && info.status().code() == StatusCode::kNotFound;
    if (!info.ok()) why = info.status().message();
  });
  EXPECT_TRUE(unknown);
  EXPECT_NE(why.find("died long ago"), std::string::npos) << why;
  EXPECT_TRUE(directory_.Kill(KillFor(first.id)).ok()) << "killing a long-dead actor must not fail";
  const auto newest = Changed(last.id, -1);
  ASSERT_TRUE(newest.has_value());
  EXPECT_EQ(newest->cause, "it was killed by ActorHandle::Kill()");
  std::size_t total = 0;
  (void)directory_.Actors(1, total);
  EXPECT_EQ(total, kMade + 1) << "forgotten actors still count";
}

}  // namespace
}  // namespace sray::core
