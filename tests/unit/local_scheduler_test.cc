// The node manager's decisions, as plain values: what LocalScheduler asks
// the node manager to do for each event.

#include "core/local_scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "cpu_node.h"

namespace sray::core {
namespace {

template <typename Effect>
std::vector<Effect> All(const SchedulerEffects& effects) {
  std::vector<Effect> found;
  for (const auto& effect : effects) {
    if (const auto* typed = std::get_if<Effect>(&effect)) found.push_back(*typed);
  }
  return found;
}

TaskSpec Task(std::uint64_t id, double cpus, TaskKind kind = TaskKind::kFunction) {
  TaskSpec spec;
  spec.task_id = id;
  spec.return_id = ObjectId{0, id};
  spec.function = "f";
  spec.resources = {{"CPU", cpus}};
  spec.owner_rank = 0;
  spec.kind = kind;
  return spec;
}

TaskOutcome Done(const TaskSpec& spec) {
  TaskOutcome outcome = FailedOutcome(spec, OutcomeKind::kInlineValue, "");
  return outcome;
}

class LocalSchedulerTest : public ::testing::Test {
 protected:
  // Node 0 of two, 2 CPUs each, at most 2 task workers.
  LocalScheduler scheduler_{LocalSchedulerConfig{
      .node_id = 0, .total = {{"CPU", 2}}, .gpu_devices = 0, .max_workers = 2}};

  void SetUp() override {
    EXPECT_TRUE(scheduler_.ApplyClusterView({CpuNode(0, 2), CpuNode(1, 2)}).empty());
  }

  // Starts and registers one worker for the effects that asked for it.
  SchedulerEffects StartAll(const SchedulerEffects& effects, pid_t& next_pid) {
    SchedulerEffects later;
    for (const auto& start : All<effects::StartWorker>(effects)) {
      (void)scheduler_.OnWorkerSpawned(start.rank, next_pid++);
      for (auto& effect : scheduler_.OnWorkerRegistered(start.rank)) later.push_back(effect);
    }
    return later;
  }

  // Submits tasks 2 to 65,537, each start failing at once, until the rank
  // counter has come round once more to where task 1's worker started; the
  // rank that last start took (0 when one asked no start or several).
  std::uint32_t RankOfTheStartThatWraps() {
    std::uint32_t last = 0;
    for (std::uint64_t task = 2; task <= kWorkersPerNodeLimit + 1; ++task) {
      const auto starts = All<effects::StartWorker>(scheduler_.Submit(Task(task, 1)));
      if (starts.size() != 1) return 0;
      last = starts[0].rank;
      (void)scheduler_.OnWorkerSpawnFailed(last, "test");
    }
    return last;
  }
};

TEST_F(LocalSchedulerTest, ATaskStartsAWorkerAndRunsThereOnceItRegisters) {
  const auto submitted = scheduler_.Submit(Task(1, 1));
  const auto starts = All<effects::StartWorker>(submitted);
  ASSERT_EQ(starts.size(), 1u);
  EXPECT_GE(starts[0].rank, kFirstWorkerRank);
  EXPECT_TRUE(All<effects::RunOnWorker>(submitted).empty());
  EXPECT_TRUE(scheduler_.OnWorkerSpawned(starts[0].rank, 100).empty());
  const auto registered = scheduler_.OnWorkerRegistered(starts[0].rank);
  const auto runs = All<effects::RunOnWorker>(registered);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].worker, starts[0].rank);
  EXPECT_EQ(runs[0].task.task_id, 1u);
  EXPECT_EQ(scheduler_.available().at("CPU"), 1.0);

  const auto done = scheduler_.OnTaskDone(starts[0].rank, Done(runs[0].task));
  const auto delivered = All<effects::DeliverOutcome>(done);
  ASSERT_EQ(delivered.size(), 1u);
  EXPECT_EQ(delivered[0].outcome.task_id, 1u);
  EXPECT_EQ(scheduler_.available().at("CPU"), 2.0) << "the grant was not given back";
  // The worker is idle again: the next task needs no new process.
  const auto next = scheduler_.Submit(Task(2, 1));
  EXPECT_TRUE(All<effects::StartWorker>(next).empty());
  ASSERT_EQ(All<effects::RunOnWorker>(next).size(), 1u);
}

TEST_F(LocalSchedulerTest, ATaskNoNodeCanEverRunFailsAtOnceNamingTheLargestNode) {
  const auto effects = scheduler_.Submit(Task(1, 64));
  const auto delivered = All<effects::DeliverOutcome>(effects);
  ASSERT_EQ(delivered.size(), 1u);
  EXPECT_EQ(static_cast<OutcomeKind>(delivered[0].outcome.kind), OutcomeKind::kInfeasible);
  EXPECT_NE(delivered[0].outcome.error_message.find("no node of this job can ever provide that"),
            std::string::npos)
      << delivered[0].outcome.error_message;
  EXPECT_EQ(All<effects::StartWorker>(effects).size(), 0u);
}

TEST_F(LocalSchedulerTest, ATaskTooBigForThisNodeMovesToOneWhereItFits) {
  LocalScheduler small{LocalSchedulerConfig{
      .node_id = 0, .total = {{"CPU", 1}}, .gpu_devices = 0, .max_workers = 2}};
  (void)small.ApplyClusterView({CpuNode(0, 1), CpuNode(1, 4)});
  const auto effects = small.Submit(Task(1, 3));
  const auto forwarded = All<effects::ForwardToNode>(effects);
  ASSERT_EQ(forwarded.size(), 1u);
  EXPECT_EQ(forwarded[0].node_rank, 1u);
  EXPECT_EQ(forwarded[0].task.hops, 1u);
}

// A burst's tasks beyond what this node holds do not wait for its workers
// to start: they go to a node with room at once, so every node starts its
// workers together; those that fit here stay, as do the rest once no node
// has room.
TEST_F(LocalSchedulerTest, TasksBeyondWhatThisNodeHoldsGoAtOnceToANodeWithRoom) {
  std::vector<effects::ForwardToNode> forwarded;
  std::size_t starts = 0;
  for (std::uint64_t id = 1; id <= 5; ++id) {
    const auto effects = scheduler_.Submit(Task(id, 1));
    for (const auto& forward : All<effects::ForwardToNode>(effects)) forwarded.push_back(forward);
    starts += All<effects::StartWorker>(effects).size();
  }
  ASSERT_EQ(forwarded.size(), 2u) << "node 1 has room for two";
  EXPECT_EQ(forwarded[0].task.task_id, 3u);
  EXPECT_EQ(forwarded[1].task.task_id, 4u);
  for (const auto& forward : forwarded) EXPECT_EQ(forward.node_rank, 1u);
  EXPECT_EQ(starts, 2u) << "tasks 1 and 2 start this node's workers";

  pid_t pid = 100;
  SchedulerEffects started;
  for (std::uint32_t rank = kFirstWorkerRank; rank < kFirstWorkerRank + 2; ++rank) {
    (void)scheduler_.OnWorkerSpawned(rank, pid++);
    for (auto& effect : scheduler_.OnWorkerRegistered(rank)) started.push_back(effect);
  }
  std::vector<std::uint64_t> ran;
  for (const auto& run : All<effects::RunOnWorker>(started)) ran.push_back(run.task.task_id);
  EXPECT_EQ(ran, (std::vector<std::uint64_t>{1, 2})) << "task 5 waits behind them here";
}

// A node whose CPUs look free but whose queue holds tasks (waiting for its
// workers to start) takes no more of them: its free resources do not yet
// show what is queued there.
TEST_F(LocalSchedulerTest, TasksDoNotGoAheadToANodeThatLooksFreeButHasAQueue) {
  (void)scheduler_.OnResourceUpdate(
      ResourceUpdate{.node_id = 1, .available = {{"CPU", 2}}, .queued = 2});
  for (std::uint64_t id = 1; id <= 4; ++id) {
    EXPECT_TRUE(All<effects::ForwardToNode>(scheduler_.Submit(Task(id, 1))).empty())
        << "task " << id << " went to node 1";
  }
}

TEST_F(LocalSchedulerTest, ASecondWholeNodeTaskGoesToTheOtherNodeWithoutWaitingForAWorker) {
  EXPECT_EQ(All<effects::StartWorker>(scheduler_.Submit(Task(1, 2))).size(), 1u);
  const auto second = scheduler_.Submit(Task(2, 2));
  const auto forwarded = All<effects::ForwardToNode>(second);
  ASSERT_EQ(forwarded.size(), 1u);
  EXPECT_EQ(forwarded[0].node_rank, 1u);
  EXPECT_EQ(forwarded[0].task.task_id, 2u);
  EXPECT_TRUE(All<effects::StartWorker>(second).empty());
}

// A node lost: the tasks this node forwarded there (for owners here) come
// back as kWorkerDied outcomes, which their owners retry; a task whose
// outcome already came back does not; nothing goes there again.
TEST_F(LocalSchedulerTest, TasksForwardedToALostNodeComeBackAsWorkerDeathsAndNothingGoesThereAgain) {
  LocalScheduler small{LocalSchedulerConfig{
      .node_id = 0, .total = {{"CPU", 1}}, .gpu_devices = 0, .max_workers = 2}};
  (void)small.ApplyClusterView({CpuNode(0, 1), CpuNode(1, 4), CpuNode(2, 4)});
  std::map<std::uint64_t, std::uint32_t> went_to;
  for (std::uint64_t id = 1; id <= 6; ++id) {
    for (auto& forward : All<effects::ForwardToNode>(small.Submit(Task(id, 3)))) {
      went_to[forward.task.task_id] = forward.node_rank;
    }
  }
  std::vector<std::uint64_t> on_node_2;
  for (const auto& [id, node] : went_to) {
    if (node == 2) on_node_2.push_back(id);
  }
  ASSERT_EQ(went_to.size(), 6u);
  ASSERT_GE(on_node_2.size(), 2u) << "both remote nodes take tasks";
  // The first of node 2's tasks finished before the loss.
  TaskSpec finished = Task(on_node_2.front(), 3);
  small.OnOutcomeRouted(Done(finished));

  const auto lost = small.OnNodeLost(2, "rank 2 is unreachable");
  const auto deaths = All<effects::DeliverOutcome>(lost);
  ASSERT_EQ(deaths.size(), on_node_2.size() - 1);
  for (const auto& death : deaths) {
    EXPECT_EQ(static_cast<OutcomeKind>(death.outcome.kind), OutcomeKind::kWorkerDied);
    EXPECT_EQ(went_to.at(death.outcome.task_id), 2u);
    EXPECT_NE(death.outcome.task_id, on_node_2.front()) << "its outcome had come back already";
    EXPECT_NE(death.outcome.error_message.find("node 2, where it ran, was lost (rank 2 is unreachable)"),
              std::string::npos)
        << death.outcome.error_message;
  }
  EXPECT_TRUE(All<effects::DeliverOutcome>(small.OnNodeLost(2, "again")).empty()) << "lost once";

  for (std::uint64_t id = 10; id < 16; ++id) {
    for (const auto& forward : All<effects::ForwardToNode>(small.Submit(Task(id, 3)))) {
      EXPECT_EQ(forward.node_rank, 1u) << "task " << id << " went to the lost node";
    }
  }

  // A retried task now out on node 1; node 2's late outcome of its first try
  // must not drop that: when node 1 is lost too, the retry comes back.
  const std::uint64_t retried = deaths.front().outcome.task_id;
  TaskSpec retry = Task(retried, 3);
  retry.attempt = 1;
  const auto resent = All<effects::ForwardToNode>(small.Submit(retry));
  ASSERT_EQ(resent.size(), 1u);
  EXPECT_EQ(resent[0].node_rank, 1u);
  TaskOutcome late = Done(Task(retried, 3));
  late.node = 2;
  small.OnOutcomeRouted(late);
  bool retry_came_back = false;
  for (const auto& death : All<effects::DeliverOutcome>(small.OnNodeLost(1, "rank 1 is unreachable"))) {
    retry_came_back = retry_came_back || death.outcome.task_id == retried;
  }
  EXPECT_TRUE(retry_came_back) << "node 2's late outcome dropped the retry's entry";

  // Node 2 says it is free again (a late update): ignored; with both other
  // nodes lost, a task only they could hold is infeasible now.
  (void)small.OnResourceUpdate(ResourceUpdate{.node_id = 2, .available = {{"CPU", 4}}, .queued = 0});
  const auto after = small.Submit(Task(20, 3));
  EXPECT_TRUE(All<effects::ForwardToNode>(after).empty()) << "a task went to a lost node";
  ASSERT_EQ(All<effects::DeliverOutcome>(after).size(), 1u);
  EXPECT_EQ(static_cast<OutcomeKind>(All<effects::DeliverOutcome>(after)[0].outcome.kind), OutcomeKind::kInfeasible);
  EXPECT_TRUE(small.IsLost(2));
  EXPECT_TRUE(small.IsLost(1));
}

// Views of other nodes lag their updates: two nodes' forwards can meet on a
// node with room for one. The second moves on to a node with room now
// (spillback) instead of waiting behind a long task, and its owner's node,
// which tracks where it runs, is told. A task moves on once only, and only
// to a node with room.
TEST(LocalScheduler, AForwardedTaskThatFindsNoRoomMovesOnToANodeWithRoomAndItsOwnersNodeIsTold) {
  LocalScheduler middle{LocalSchedulerConfig{
      .node_id = 1, .total = {{"CPU", 1}}, .gpu_devices = 0, .max_workers = 2}};
  (void)middle.ApplyClusterView({CpuNode(0, 1), CpuNode(1, 1), CpuNode(2, 1)});
  (void)middle.OnResourceUpdate(
      ResourceUpdate{.node_id = 0, .available = {{"CPU", 0}}, .queued = 0});
  TaskSpec long_task = Task(1, 1);
  long_task.owner_node = 1;
  const auto start = All<effects::StartWorker>(middle.Submit(long_task));
  ASSERT_EQ(start.size(), 1u);
  (void)middle.OnWorkerSpawned(start[0].rank, 100);
  ASSERT_EQ(All<effects::RunOnWorker>(middle.OnWorkerRegistered(start[0].rank)).size(), 1u);

  TaskSpec arrived = Task(7, 1);
  arrived.owner_node = 0;
  arrived.owner_rank = 5;
  arrived.attempt = 2;
  arrived.hops = 1;
  const auto effects = middle.Submit(arrived);
  const auto forwarded = All<effects::ForwardToNode>(effects);
  ASSERT_EQ(forwarded.size(), 1u) << "it waits behind the long task";
  EXPECT_EQ(forwarded[0].node_rank, 2u);
  EXPECT_EQ(forwarded[0].task.hops, 2u);
  EXPECT_TRUE(All<effects::RunOnWorker>(effects).empty());
  const auto told = All<effects::TellTaskMoved>(effects);
  ASSERT_EQ(told.size(), 1u);
  EXPECT_EQ(told[0].owner_node, 0u);
  EXPECT_EQ(told[0].moved.owner_rank, 5u);
  EXPECT_EQ(told[0].moved.task_id, 7u);
  EXPECT_EQ(told[0].moved.attempt, 2);
  EXPECT_EQ(told[0].moved.node, 2u);

  // Node 2 is taken now (assumed until its next update): the next one stays.
  TaskSpec next = arrived;
  next.task_id = 8;
  EXPECT_TRUE(All<effects::ForwardToNode>(middle.Submit(next)).empty())
      << "moved on to a node without room";
  // One already moved on twice stays too, even with room elsewhere.
  (void)middle.OnResourceUpdate(
      ResourceUpdate{.node_id = 2, .available = {{"CPU", 1}}, .queued = 0});
  TaskSpec twice = arrived;
  twice.task_id = 9;
  twice.hops = 2;
  EXPECT_TRUE(All<effects::ForwardToNode>(middle.Submit(twice)).empty()) << "a task passed around";
}

// The owner's node follows a task that moved on: the loss of the node it
// was first sent to no longer fails it, the loss of the node it went to
// does, at once when that node is lost already. A move of another try, or
// one heard of after the outcome, changes nothing.
TEST(LocalScheduler, ATaskThatMovedOnFailsWithTheNodeItWentTo) {
  LocalScheduler owners{LocalSchedulerConfig{
      .node_id = 0, .total = {{"CPU", 1}}, .gpu_devices = 0, .max_workers = 2}};
  (void)owners.ApplyClusterView({CpuNode(0, 1), CpuNode(1, 4), CpuNode(2, 4), CpuNode(3, 4)});
  std::map<std::uint64_t, std::uint32_t> went_to;
  for (std::uint64_t id = 1; id <= 2; ++id) {
    for (const auto& forward : All<effects::ForwardToNode>(owners.Submit(Task(id, 3)))) {
      went_to[forward.task.task_id] = forward.node_rank;
    }
  }
  ASSERT_EQ(went_to, (std::map<std::uint64_t, std::uint32_t>{{1, 1}, {2, 2}}))
      << "one per node with room";
  EXPECT_TRUE(
      owners
          .OnTaskMoved(TaskMoved{.owner_rank = 0, .task_id = 1, .attempt = 0, .node = 3, .hops = 2})
          .empty());
  EXPECT_TRUE(
      owners
          .OnTaskMoved(TaskMoved{.owner_rank = 0, .task_id = 2, .attempt = 1, .node = 3, .hops = 2})
          .empty())
      << "another try's move";

  EXPECT_TRUE(All<effects::DeliverOutcome>(owners.OnNodeLost(1, "gone")).empty())
      << "task 1 moved on from node 1";
  const auto lost = All<effects::DeliverOutcome>(owners.OnNodeLost(3, "unreachable"));
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].outcome.task_id, 1u);
  EXPECT_EQ(static_cast<OutcomeKind>(lost[0].outcome.kind), OutcomeKind::kWorkerDied);
  EXPECT_NE(lost[0].outcome.error_message.find("node 3, where it ran, was lost (unreachable)"),
            std::string::npos)
      << lost[0].outcome.error_message;

  // Task 2 moves on to node 3, lost already: it fails at once; heard of
  // again after that, the move changes nothing.
  const TaskMoved late{.owner_rank = 0, .task_id = 2, .attempt = 0, .node = 3, .hops = 2};
  const auto at_once = All<effects::DeliverOutcome>(owners.OnTaskMoved(late));
  ASSERT_EQ(at_once.size(), 1u);
  EXPECT_EQ(at_once[0].outcome.task_id, 2u);
  EXPECT_NE(at_once[0].outcome.error_message.find("(unreachable)"), std::string::npos);
  EXPECT_TRUE(owners.OnTaskMoved(late).empty());
  EXPECT_TRUE(All<effects::DeliverOutcome>(owners.OnNodeLost(2, "gone too")).empty())
      << "task 2 was settled";
}

// An earlier try's outcome, arriving after its retry went out (from a node
// it had moved on to), leaves the retry's entry: its node's loss still
// fails the retry.
TEST(LocalScheduler, AnEarlierTrysOutcomeDoesNotDropTheRetrysEntry) {
  LocalScheduler owners{LocalSchedulerConfig{
      .node_id = 0, .total = {{"CPU", 1}}, .gpu_devices = 0, .max_workers = 2}};
  (void)owners.ApplyClusterView({CpuNode(0, 1), CpuNode(1, 4)});
  TaskSpec retry = Task(1, 3);
  retry.attempt = 1;
  ASSERT_EQ(All<effects::ForwardToNode>(owners.Submit(retry)).size(), 1u);
  owners.OnOutcomeRouted(Done(Task(1, 3)));
  const auto lost = All<effects::DeliverOutcome>(owners.OnNodeLost(1, "gone"));
  ASSERT_EQ(lost.size(), 1u) << "try 0's outcome dropped try 1's entry";
  EXPECT_EQ(lost[0].outcome.attempt, 1);
}

TEST(LocalScheduler, WorkersStartedAreCappedByMaxWorkers) {
  LocalScheduler scheduler{LocalSchedulerConfig{
      .node_id = 0, .total = {{"CPU", 2}}, .gpu_devices = 0, .max_workers = 2}};
  // Nothing is dispatched before the cluster view: all six wait for it.
  for (std::uint64_t id = 1; id <= 6; ++id) EXPECT_TRUE(scheduler.Submit(Task(id, 0.25)).empty());
  const auto effects = scheduler.ApplyClusterView({CpuNode(0, 2)});
  EXPECT_EQ(All<effects::StartWorker>(effects).size(), 2u);
}

// Workers still starting count once against the cap, not twice: tasks
// submitted one at a time start as many workers as tasks submitted together.
TEST(LocalScheduler, TasksSubmittedOneAtATimeStartWorkersUpToMaxWorkers) {
  LocalScheduler scheduler{LocalSchedulerConfig{
      .node_id = 0, .total = {{"CPU", 2}}, .gpu_devices = 0, .max_workers = 2}};
  (void)scheduler.ApplyClusterView({CpuNode(0, 2)});
  std::size_t starts = 0;
  for (std::uint64_t id = 1; id <= 6; ++id) {
    starts += All<effects::StartWorker>(scheduler.Submit(Task(id, 0.25))).size();
  }
  EXPECT_EQ(starts, 2u);
}

TEST_F(LocalSchedulerTest, ADeadWorkersTaskFailsRetryablyAndTheTasksBehindItGoBack) {
  LocalScheduler busy{LocalSchedulerConfig{
      .node_id = 0, .total = {{"CPU", 1}}, .gpu_devices = 0, .max_workers = 1}};
  (void)busy.ApplyClusterView({CpuNode(0, 1)});
  const auto first = busy.Submit(Task(1, 1));
  const auto start = All<effects::StartWorker>(first).at(0);
  (void)busy.OnWorkerSpawned(start.rank, 77);
  ASSERT_EQ(All<effects::RunOnWorker>(busy.OnWorkerRegistered(start.rank)).size(), 1u);
  // No room left: a run of tasks waits in the busy worker (pipelined).
  (void)busy.Submit(Task(2, 1));
  ASSERT_EQ(All<effects::RunOnWorker>(busy.Submit(Task(3, 1))).size(), 2u);

  const auto exited = busy.OnWorkerExited(77, "signal 9");
  ASSERT_EQ(All<effects::ForgetWorker>(exited).size(), 1u);
  const auto delivered = All<effects::DeliverOutcome>(exited);
  ASSERT_EQ(delivered.size(), 1u);
  // Whatever the dead attempt made of its result in the store is freed
  // before the owner hears (and retries): it would otherwise stay.
  // So is the result of task 2, which waited behind it (a worker blocked in
  // Get runs later tasks first).
  const auto discarded = All<effects::DiscardResult>(exited);
  ASSERT_EQ(discarded.size(), 3u);
  EXPECT_EQ(discarded[0].id, (ObjectId{0, 1}));
  EXPECT_EQ(discarded[1].id, (ObjectId{0, 3}));
  EXPECT_EQ(discarded[2].id, (ObjectId{0, 2}));
  const auto position = [&exited](auto is) {
    return std::find_if(exited.begin(), exited.end(),
                        [&is](const SchedulerEffect& effect) { return std::visit(is, effect); }) -
           exited.begin();
  };
  EXPECT_LT(position([](const auto& effect) {
              return std::is_same_v<std::decay_t<decltype(effect)>, effects::DiscardResult>;
            }),
            position([](const auto& effect) {
              return std::is_same_v<std::decay_t<decltype(effect)>, effects::DeliverOutcome>;
            }));
  EXPECT_EQ(delivered[0].outcome.task_id, 1u);
  EXPECT_EQ(static_cast<OutcomeKind>(delivered[0].outcome.kind), OutcomeKind::kWorkerDied);
  EXPECT_EQ(delivered[0].outcome.pid, 77);
  // Tasks 2 and 3 never started: they are queued again and a new worker
  // starts for them.
  EXPECT_EQ(All<effects::StartWorker>(exited).size(), 1u);
  EXPECT_EQ(busy.queued(), 2u);
}

// The intermittent failure of tasks_check's Wait check under srun: a 1 ms
// task submitted right after a 10 s one was forwarded to a node whose room
// an older view had promised, found the 10 s task's worker there busy and no
// room elsewhere in that node's view, and was pipelined behind it: committed
// to that worker, it waited the 10 s although the third node was idle, as
// the next resource update said a moment later. A lone task now stays
// queued and moves on with that update.
TEST(LocalScheduler, ALoneTaskIsNotPipelinedBehindALongOneAndMovesOnWhenRoomShowsElsewhere) {
  LocalScheduler middle{LocalSchedulerConfig{
      .node_id = 1, .total = {{"CPU", 1}}, .gpu_devices = 0, .max_workers = 2}};
  (void)middle.ApplyClusterView({CpuNode(0, 1), CpuNode(1, 1), CpuNode(2, 1)});
  (void)middle.OnResourceUpdate(
      ResourceUpdate{.node_id = 0, .available = {{"CPU", 0}}, .queued = 0});
  (void)middle.OnResourceUpdate(
      ResourceUpdate{.node_id = 2, .available = {{"CPU", 0}}, .queued = 0});
  TaskSpec long_task = Task(1, 1);
  long_task.owner_node = 0;
  long_task.hops = 1;
  const auto start = All<effects::StartWorker>(middle.Submit(long_task));
  ASSERT_EQ(start.size(), 1u);
  (void)middle.OnWorkerSpawned(start[0].rank, 100);
  ASSERT_EQ(All<effects::RunOnWorker>(middle.OnWorkerRegistered(start[0].rank)).size(), 1u);

  TaskSpec short_task = Task(2, 1);
  short_task.owner_node = 0;
  short_task.hops = 1;
  const auto arrived = middle.Submit(short_task);
  EXPECT_TRUE(All<effects::RunOnWorker>(arrived).empty()) << "pipelined behind the long task";
  EXPECT_TRUE(All<effects::ForwardToNode>(arrived).empty()) << "no room anywhere in this view";
  EXPECT_EQ(middle.queued(), 1u);

  const auto update =
      middle.OnResourceUpdate(ResourceUpdate{.node_id = 2, .available = {{"CPU", 1}}, .queued = 0});
  const auto moved = All<effects::ForwardToNode>(update);
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_EQ(moved[0].node_rank, 2u);
  EXPECT_EQ(moved[0].task.task_id, 2u);
  EXPECT_EQ(middle.queued(), 0u);
}

// Moves reach the owner from the nodes that made them, in any order: a
// late report of an earlier move must not take the owner back to a node
// the task left, or the loss of the node it runs on would go unnoticed.
TEST(LocalScheduler, AnEarlierMoveReportedLateDoesNotHideWhereTheTaskIs) {
  LocalScheduler owners{LocalSchedulerConfig{
      .node_id = 0, .total = {{"CPU", 1}}, .gpu_devices = 0, .max_workers = 2}};
  (void)owners.ApplyClusterView({CpuNode(0, 1), CpuNode(1, 4), CpuNode(2, 4), CpuNode(3, 4)});
  const auto sent = All<effects::ForwardToNode>(owners.Submit(Task(1, 3)));
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_EQ(sent[0].task.hops, 1u);
  // Node 1 sent it to node 2 (hops 2), node 2 to node 3 (hops 3); node 3's
  // report arrives first.
  (void)owners.OnTaskMoved(
      TaskMoved{.owner_rank = 0, .task_id = 1, .attempt = 0, .node = 3, .hops = 3});
  (void)owners.OnTaskMoved(
      TaskMoved{.owner_rank = 0, .task_id = 1, .attempt = 0, .node = 2, .hops = 2});
  EXPECT_TRUE(All<effects::DeliverOutcome>(owners.OnNodeLost(2, "gone")).empty())
      << "failed with node 2, which it had left";
  const auto lost = All<effects::DeliverOutcome>(owners.OnNodeLost(3, "unreachable"));
  ASSERT_EQ(lost.size(), 1u) << "the loss of node 3, where it ran, went unnoticed";
  EXPECT_EQ(lost[0].outcome.task_id, 1u);
}

// A task spilled back here by a node whose view of this one was out of
// date (this node's CPU was taken a moment before): its submitter sent it
// on for load, the next node found no room and sent it here, where no room
// is either. It still moves once an update shows room elsewhere; kept, it
// waited out a 10 s task on this node while the others were idle
// (tasks_check's Wait check under srun, 2026-12-07).
TEST(LocalScheduler, ATaskSpilledBackOnAStaleViewStillMovesWhenRoomShowsElsewhere) {
  LocalScheduler first{LocalSchedulerConfig{
      .node_id = 0, .total = {{"CPU", 1}}, .gpu_devices = 0, .max_workers = 2}};
  (void)first.ApplyClusterView({CpuNode(0, 1), CpuNode(1, 1), CpuNode(2, 1)});
  (void)first.OnResourceUpdate(
      ResourceUpdate{.node_id = 1, .available = {{"CPU", 0.9}}, .queued = 0});
  (void)first.OnResourceUpdate(
      ResourceUpdate{.node_id = 2, .available = {{"CPU", 0.9}}, .queued = 0});
  const TaskSpec long_task = Task(1, 1);
  const auto start = All<effects::StartWorker>(first.Submit(long_task));
  ASSERT_EQ(start.size(), 1u);
  (void)first.OnWorkerSpawned(start[0].rank, 100);
  ASSERT_EQ(All<effects::RunOnWorker>(first.OnWorkerRegistered(start[0].rank)).size(), 1u);

  TaskSpec short_task = Task(2, 1);
  short_task.hops = 2;
  const auto arrived = first.Submit(short_task);
  EXPECT_TRUE(All<effects::RunOnWorker>(arrived).empty()) << "pipelined behind the long task";
  EXPECT_TRUE(All<effects::ForwardToNode>(arrived).empty()) << "no room anywhere in this view";

  const auto update =
      first.OnResourceUpdate(ResourceUpdate{.node_id = 1, .available = {{"CPU", 1}}, .queued = 0});
  const auto moved = All<effects::ForwardToNode>(update);
  ASSERT_EQ(moved.size(), 1u) << "the task stayed behind the long one";
  EXPECT_EQ(moved[0].node_rank, 1u);
  EXPECT_EQ(moved[0].task.task_id, 2u);
  EXPECT_EQ(moved[0].task.hops, 3u);
  EXPECT_EQ(first.queued(), 0u);
}

// A task passed between nodes whose views keep showing room that is gone
// stops moving after kMostHops and waits for a worker where it is.
TEST(LocalScheduler, ATaskStopsMovingAfterTheMostHops) {
  LocalScheduler first{LocalSchedulerConfig{
      .node_id = 0, .total = {{"CPU", 1}}, .gpu_devices = 0, .max_workers = 2}};
  (void)first.ApplyClusterView({CpuNode(0, 1), CpuNode(1, 1)});
  const auto start = All<effects::StartWorker>(first.Submit(Task(1, 1)));
  ASSERT_EQ(start.size(), 1u);
  (void)first.OnWorkerSpawned(start[0].rank, 100);
  ASSERT_EQ(All<effects::RunOnWorker>(first.OnWorkerRegistered(start[0].rank)).size(), 1u);
  TaskSpec bounced = Task(2, 1);
  bounced.hops = kMostHops;
  EXPECT_TRUE(All<effects::ForwardToNode>(first.Submit(bounced)).empty())
      << "moved past the most hops, though node 1 shows room";
  EXPECT_EQ(first.queued(), 1u);
}

// Without room elsewhere, a lone task queued behind a busy worker runs on
// that worker as soon as it is free.
TEST(LocalScheduler, ALoneQueuedTaskTakesTheNextFreeWorker) {
  LocalScheduler single{LocalSchedulerConfig{
      .node_id = 0, .total = {{"CPU", 1}}, .gpu_devices = 0, .max_workers = 1}};
  (void)single.ApplyClusterView({CpuNode(0, 1)});
  const TaskSpec first = Task(1, 1);
  const auto start = All<effects::StartWorker>(single.Submit(first));
  ASSERT_EQ(start.size(), 1u);
  (void)single.OnWorkerSpawned(start[0].rank, 100);
  ASSERT_EQ(All<effects::RunOnWorker>(single.OnWorkerRegistered(start[0].rank)).size(), 1u);
  EXPECT_TRUE(All<effects::RunOnWorker>(single.Submit(Task(2, 1))).empty());
  const auto done = single.OnTaskDone(start[0].rank, Done(first));
  const auto runs = All<effects::RunOnWorker>(done);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].worker, start[0].rank);
  EXPECT_EQ(runs[0].task.task_id, 2u);
}

TEST_F(LocalSchedulerTest, WorkersThatDieBeforeRegisteringFailTheQueueWithTheFix) {
  LocalScheduler scheduler{LocalSchedulerConfig{
      .node_id = 0, .total = {{"CPU", 1}}, .gpu_devices = 0, .max_workers = 1}};
  (void)scheduler.ApplyClusterView({CpuNode(0, 1)});
  auto effects = scheduler.Submit(Task(1, 1));
  pid_t pid = 500;
  std::vector<effects::DeliverOutcome> failures;
  for (int round = 0; round < 5 && failures.empty(); ++round) {
    const auto starts = All<effects::StartWorker>(effects);
    ASSERT_EQ(starts.size(), 1u) << "round " << round;
    (void)scheduler.OnWorkerSpawned(starts[0].rank, pid);
    effects = scheduler.OnWorkerExited(pid++, "exit status 1");
    failures = All<effects::DeliverOutcome>(effects);
  }
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_NE(failures[0].outcome.error_message.find("sray::Init(argc, argv) at the top of main"),
            std::string::npos)
      << failures[0].outcome.error_message;
  EXPECT_EQ(pid, 503) << "the queue failed after " << pid - 500 << " deaths, not 3";
}

// Chaos worker-kill hung a job: three workers killed while starting, after
// others had run tasks, stopped the node from starting any more, and its
// queued task waited forever.
TEST_F(LocalSchedulerTest, WorkersKilledWhileStartingAfterOthersRanDoNotStopNewStarts) {
  LocalScheduler scheduler{LocalSchedulerConfig{
      .node_id = 0, .total = {{"CPU", 1}}, .gpu_devices = 0, .max_workers = 1}};
  (void)scheduler.ApplyClusterView({CpuNode(0, 1)});
  pid_t pid = 600;
  auto effects = scheduler.Submit(Task(1, 1));
  auto start = All<effects::StartWorker>(effects).at(0);
  (void)scheduler.OnWorkerSpawned(start.rank, pid);
  const auto runs = All<effects::RunOnWorker>(scheduler.OnWorkerRegistered(start.rank));
  ASSERT_EQ(runs.size(), 1u);
  (void)scheduler.OnTaskDone(runs[0].worker, Done(runs[0].task));
  // The worker is killed; a task comes; each worker started for it is killed
  // before it registers.
  effects = scheduler.OnWorkerExited(pid++, "signal 9");
  effects = scheduler.Submit(Task(2, 1));
  for (int round = 0; round < 5; ++round) {
    const auto starts = All<effects::StartWorker>(effects);
    ASSERT_EQ(starts.size(), 1u) << "no worker started after " << round << " deaths while starting";
    start = starts[0];
    (void)scheduler.OnWorkerSpawned(start.rank, pid);
    effects = scheduler.OnWorkerExited(pid++, "signal 9");
    EXPECT_TRUE(All<effects::DeliverOutcome>(effects).empty()) << "the task is not failed";
  }
  start = All<effects::StartWorker>(effects).at(0);
  (void)scheduler.OnWorkerSpawned(start.rank, pid);
  EXPECT_EQ(All<effects::RunOnWorker>(scheduler.OnWorkerRegistered(start.rank)).size(), 1u)
      << "the queued task runs on the next worker that starts";
}

TEST_F(LocalSchedulerTest, AFailedSpawnFailsTheQueueInsteadOfRetryingForever) {
  const auto effects = scheduler_.Submit(Task(1, 1));
  const auto start = All<effects::StartWorker>(effects).at(0);
  const auto failed = scheduler_.OnWorkerSpawnFailed(start.rank, "fork: out of memory");
  const auto delivered = All<effects::DeliverOutcome>(failed);
  ASSERT_EQ(delivered.size(), 1u);
  EXPECT_EQ(delivered[0].outcome.error_message,
            "cannot start a worker on node 0: fork: out of memory");
  EXPECT_TRUE(All<effects::StartWorker>(failed).empty());
  EXPECT_EQ(scheduler_.queued(), 0u);
}

TEST_F(LocalSchedulerTest, ATaskWaitingInGetLendsItsCpusUntilItResumes) {
  pid_t pid = 10;
  auto effects = scheduler_.Submit(Task(1, 2));
  auto started = StartAll(effects, pid);
  const auto runs = All<effects::RunOnWorker>(started);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(scheduler_.available().at("CPU"), 0.0);
  const auto blocked = scheduler_.OnWorkerBlocked(runs[0].worker, true);
  EXPECT_EQ(scheduler_.available().at("CPU"), 2.0);
  (void)blocked;
  (void)scheduler_.OnWorkerBlocked(runs[0].worker, false);
  EXPECT_EQ(scheduler_.available().at("CPU"), 0.0);
}

// Every worker of the pool waits in Get: their CPUs are lent, and a task
// those waits may need gets a worker of its own beyond max_workers instead
// of waiting for ever.
TEST_F(LocalSchedulerTest, WorkersWaitingInGetDoNotCountAgainstThePoolsCap) {
  pid_t pid = 100;
  SchedulerEffects started;
  for (std::uint64_t id = 1; id <= 2; ++id) {
    for (auto& effect : StartAll(scheduler_.Submit(Task(id, 1)), pid)) started.push_back(effect);
  }
  const auto running = All<effects::RunOnWorker>(started);
  ASSERT_EQ(running.size(), 2u);
  // Node 1 has room for the next task, and takes it.
  const auto third = scheduler_.Submit(Task(3, 1));
  EXPECT_EQ(All<effects::ForwardToNode>(third).size(), 1u);
  EXPECT_TRUE(All<effects::StartWorker>(third).empty());
  std::size_t starts = 0;
  for (const auto& run : running)
    starts += All<effects::StartWorker>(scheduler_.OnWorkerBlocked(run.worker, true)).size();
  // Their CPUs are lent: a task submitted now fits here and needs a worker.
  starts += All<effects::StartWorker>(scheduler_.Submit(Task(4, 1))).size();
  EXPECT_EQ(starts, 1u) << "no worker starts while every worker of the pool waits in Get";
}

TEST_F(LocalSchedulerTest, AnActorsWorkerKeepsItsGrantAndItsProcessDeathIsReported) {
  pid_t pid = 20;
  TaskSpec constructor = Task(1, 1, TaskKind::kActorCreation);
  constructor.actor_id = 9;
  auto started = StartAll(scheduler_.Submit(constructor), pid);
  const auto runs = All<effects::RunOnWorker>(started);
  ASSERT_EQ(runs.size(), 1u);
  TaskOutcome created = Done(runs[0].task);
  created.actor_id = 9;
  const auto ready = All<effects::ActorReady>(scheduler_.OnTaskDone(runs[0].worker, created));
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].outcome.worker_rank, runs[0].worker);
  EXPECT_EQ(scheduler_.available().at("CPU"), 1.0) << "the actor's grant was released";

  const auto exited = scheduler_.OnWorkerExited(20, "signal 9");
  const auto deaths = All<effects::ActorProcessDied>(exited);
  ASSERT_EQ(deaths.size(), 1u);
  EXPECT_EQ(deaths[0].death.id, 9u);
  EXPECT_EQ(deaths[0].death.cause, "ended with signal 9");
  EXPECT_EQ(scheduler_.available().at("CPU"), 2.0);
}

// Makes actor `actor_id` (asking `cpus`) on a worker started or taken from
// the pool; returns that worker's rank.
std::uint32_t MakeActor(LocalScheduler& scheduler, std::uint64_t actor_id, double cpus,
                        pid_t& next_pid, std::size_t* started = nullptr) {
  TaskSpec constructor = Task(actor_id, cpus, TaskKind::kActorCreation);
  constructor.actor_id = actor_id;
  auto effects = scheduler.Submit(constructor);
  const auto starts = All<effects::StartWorker>(effects);
  if (started != nullptr) *started = starts.size();
  for (const auto& start : starts) {
    (void)scheduler.OnWorkerSpawned(start.rank, next_pid++);
    for (auto& effect : scheduler.OnWorkerRegistered(start.rank)) effects.push_back(effect);
  }
  const auto runs = All<effects::RunOnWorker>(effects);
  if (runs.size() != 1) {
    ADD_FAILURE() << "the constructor of actor " << actor_id << " went to " << runs.size()
                  << " workers";
    return 0;
  }
  TaskOutcome created = Done(runs[0].task);
  created.actor_id = actor_id;
  const auto ready = All<effects::ActorReady>(scheduler.OnTaskDone(runs[0].worker, created));
  EXPECT_EQ(ready.size(), 1u);
  return runs[0].worker;
}

TEST_F(LocalSchedulerTest, AKilledActorsWorkerRetiresItAndServesTheNextActorWithoutAStart) {
  pid_t pid = 20;
  std::size_t started = 0;
  const std::uint32_t worker = MakeActor(scheduler_, 9, 1, pid, &started);
  EXPECT_EQ(started, 1u);
  const auto stopped = scheduler_.StopActor(ActorKill{.id = 9, .no_restart = true, .incarnation = 0});
  EXPECT_TRUE(All<effects::KillWorker>(stopped).empty()) << "the process is kept";
  const auto retires = All<effects::RetireActor>(stopped);
  ASSERT_EQ(retires.size(), 1u);
  EXPECT_EQ(retires[0].worker, worker);
  EXPECT_EQ(retires[0].kill.id, 9u);
  EXPECT_EQ(scheduler_.available().at("CPU"), 1.0) << "the grant is held until it retired";

  // Not the actor it was asked to retire: ignored.
  EXPECT_TRUE(scheduler_.OnActorRetired(worker, ActorKill{.id = 8, .no_restart = true, .incarnation = 0}).empty());
  const auto retired =
      scheduler_.OnActorRetired(worker, ActorKill{.id = 9, .no_restart = true, .incarnation = 0});
  const auto deaths = All<effects::ActorProcessDied>(retired);
  ASSERT_EQ(deaths.size(), 1u) << "the directory hears that the actor ended";
  EXPECT_EQ(deaths[0].death.id, 9u);
  EXPECT_EQ(deaths[0].death.pid, 20);
  EXPECT_EQ(deaths[0].death.cause, "was ended by Kill");
  EXPECT_EQ(scheduler_.available().at("CPU"), 2.0);
  EXPECT_TRUE(scheduler_.OnActorRetired(worker, ActorKill{.id = 9, .no_restart = true, .incarnation = 0}).empty())
      << "a repeated answer changes nothing";

  EXPECT_EQ(MakeActor(scheduler_, 10, 1, pid, &started), worker) << "the next actor reuses it";
  EXPECT_EQ(started, 0u);
  EXPECT_EQ(scheduler_.workers(), 1u);
}

TEST_F(LocalSchedulerTest, WorkersBackFromABurstOfActorsAboveThePoolSizeEndWhenIdleLongEnough) {
  pid_t pid = 30;
  std::vector<std::uint32_t> workers;
  for (std::uint64_t actor = 1; actor <= 3; ++actor) workers.push_back(MakeActor(scheduler_, actor, 0, pid));
  ASSERT_EQ(scheduler_.workers(), 3u) << "actors' workers do not count against max_workers (2)";
  EXPECT_FALSE(scheduler_.NextDeadline().has_value());
  for (std::uint64_t actor = 1; actor <= 3; ++actor) {
    const auto effects =
        scheduler_.StopActor(ActorKill{.id = actor, .no_restart = true, .incarnation = 0});
    ASSERT_EQ(All<effects::RetireActor>(effects).size(), 1u);
  }
  const auto retired_at = std::chrono::steady_clock::now();
  for (std::uint64_t actor = 1; actor <= 3; ++actor) {
    (void)scheduler_.OnActorRetired(workers[actor - 1],
                                    ActorKill{.id = actor, .no_restart = true, .incarnation = 0});
  }
  ASSERT_TRUE(scheduler_.NextDeadline().has_value()) << "one worker above the pool size";
  EXPECT_TRUE(scheduler_.EndOverdue(retired_at).empty()) << "kept a while for the next actors";
  const auto asked_at = std::chrono::steady_clock::now() + kSurplusIdleLimit;
  const auto asked = All<effects::AskWorkerToEnd>(scheduler_.EndOverdue(asked_at));
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_EQ(asked[0].worker, workers[0]) << "the longest idle is asked first";
  EXPECT_EQ(scheduler_.NextDeadline(), asked_at + kRetireLimit) << "its answer is awaited";
  const auto ended = All<effects::KillWorker>(scheduler_.OnWorkerEndReply(workers[0], 0, asked_at));
  ASSERT_EQ(ended.size(), 1u) << "it owns nothing: it ends";
  EXPECT_EQ(ended[0].pid, 30);
  EXPECT_TRUE(scheduler_.OnWorkerEndReply(workers[0], 0, asked_at).empty()) << "killed once";
  EXPECT_FALSE(scheduler_.NextDeadline().has_value()) << "the pool is at its size";
  EXPECT_TRUE(All<effects::KillWorker>(
                  scheduler_.EndOverdue(std::chrono::steady_clock::now() + 10 * kSurplusIdleLimit))
                  .empty());
  // Not handed a task while it ends.
  const auto runs = All<effects::RunOnWorker>(scheduler_.Submit(Task(100, 1)));
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_NE(runs[0].worker, workers[0]);
  EXPECT_TRUE(All<effects::DeliverOutcome>(scheduler_.OnWorkerExited(30, "signal 9")).empty());
}

// Three actors made and killed: their workers are idle task workers now,
// one above max_workers (2), the first the longest idle.
std::vector<std::uint32_t> RetiredActorWorkers(LocalScheduler& scheduler, pid_t& next_pid) {
  std::vector<std::uint32_t> workers;
  for (std::uint64_t actor = 1; actor <= 3; ++actor) {
    workers.push_back(MakeActor(scheduler, actor, 0, next_pid));
  }
  for (std::uint64_t actor = 1; actor <= 3; ++actor) {
    (void)scheduler.StopActor(ActorKill{.id = actor, .no_restart = true, .incarnation = 0});
    (void)scheduler.OnActorRetired(workers[actor - 1],
                                   ActorKill{.id = actor, .no_restart = true, .incarnation = 0});
  }
  return workers;
}

TEST_F(LocalSchedulerTest, ASurplusIdleWorkerThatOwnsObjectsStaysUntilItOwnsNone) {
  pid_t pid = 35;
  const std::vector<std::uint32_t> workers = RetiredActorWorkers(scheduler_, pid);
  // Two tasks take the two newest idle workers: the first stays idle, one
  // above max_workers (2).
  std::vector<effects::RunOnWorker> busy;
  for (std::uint64_t id = 100; id < 102; ++id) {
    for (const auto& run : All<effects::RunOnWorker>(scheduler_.Submit(Task(id, 1))))
      busy.push_back(run);
  }
  ASSERT_EQ(busy.size(), 2u);
  ASSERT_NE(busy[0].worker, workers[0]);
  ASSERT_NE(busy[1].worker, workers[0]);

  auto now = std::chrono::steady_clock::now() + kSurplusIdleLimit;
  ASSERT_EQ(All<effects::AskWorkerToEnd>(scheduler_.EndOverdue(now)).size(), 1u);
  // It owns two objects: killing it would lose them.
  EXPECT_TRUE(scheduler_.OnWorkerEndReply(workers[0], 2, now).empty());
  EXPECT_EQ(scheduler_.workers(), 3u);
  EXPECT_EQ(scheduler_.NextDeadline(), now + kSurplusIdleLimit) << "asked again a limit later";
  EXPECT_TRUE(scheduler_.EndOverdue(now + kSurplusIdleLimit / 2).empty());

  // Idle again: a task may run there meanwhile.
  (void)scheduler_.OnTaskDone(busy[0].worker, Done(busy[0].task));
  const auto runs = All<effects::RunOnWorker>(scheduler_.Submit(Task(102, 1)));
  ASSERT_EQ(runs.size(), 1u);
  (void)scheduler_.OnTaskDone(runs[0].worker, Done(runs[0].task));

  // Its objects were freed since: the next ask ends it, or the other idle
  // one (each owns nothing now).
  now += 2 * kSurplusIdleLimit;
  const auto asked = All<effects::AskWorkerToEnd>(scheduler_.EndOverdue(now));
  ASSERT_EQ(asked.size(), 1u);
  const auto ended = All<effects::KillWorker>(scheduler_.OnWorkerEndReply(asked[0].worker, 0, now));
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_FALSE(scheduler_.NextDeadline().has_value()) << "the pool is at its size";
}

TEST_F(LocalSchedulerTest, ASurplusWorkerThatDoesNotAnswerTheAskToEndIsKilled) {
  pid_t pid = 38;
  const std::vector<std::uint32_t> workers = RetiredActorWorkers(scheduler_, pid);
  const auto asked_at = std::chrono::steady_clock::now() + kSurplusIdleLimit;
  ASSERT_EQ(All<effects::AskWorkerToEnd>(scheduler_.EndOverdue(asked_at)).size(), 1u);
  EXPECT_TRUE(All<effects::KillWorker>(scheduler_.EndOverdue(asked_at + kRetireLimit / 2)).empty());
  const auto killed = All<effects::KillWorker>(scheduler_.EndOverdue(asked_at + kRetireLimit));
  ASSERT_EQ(killed.size(), 1u);
  EXPECT_EQ(killed[0].pid, 38);
  EXPECT_TRUE(scheduler_.OnWorkerEndReply(workers[0], 3, asked_at + kRetireLimit).empty())
      << "an answer after the kill changes nothing";
  EXPECT_TRUE(All<effects::KillWorker>(scheduler_.EndOverdue(asked_at + 2 * kRetireLimit)).empty())
      << "killed once";
}

TEST_F(LocalSchedulerTest, AWorkerThatDoesNotRetireInTimeIsKilled) {
  pid_t pid = 40;
  (void)MakeActor(scheduler_, 5, 1, pid);
  const auto asked = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  ASSERT_EQ(All<effects::RetireActor>(
                scheduler_.StopActor(ActorKill{.id = 5, .no_restart = false, .incarnation = 0}, asked))
                .size(),
            1u);
  ASSERT_TRUE(scheduler_.NextDeadline().has_value());
  EXPECT_EQ(*scheduler_.NextDeadline(), asked + kRetireLimit);
  EXPECT_TRUE(scheduler_.EndOverdue(asked + std::chrono::seconds(1)).empty());
  const auto overdue = All<effects::KillWorker>(scheduler_.EndOverdue(asked + kRetireLimit));
  ASSERT_EQ(overdue.size(), 1u);
  EXPECT_EQ(overdue[0].pid, 40);
  EXPECT_TRUE(scheduler_.EndOverdue(asked + 2 * kRetireLimit).empty()) << "killed once";
  const auto deaths = All<effects::ActorProcessDied>(scheduler_.OnWorkerExited(40, "signal 9"));
  ASSERT_EQ(deaths.size(), 1u);
  EXPECT_EQ(deaths[0].death.cause, "was ended by Kill (its process ended with signal 9)");
  EXPECT_FALSE(scheduler_.NextDeadline().has_value());
  EXPECT_EQ(scheduler_.available().at("CPU"), 2.0);
}

TEST_F(LocalSchedulerTest, ARetirementAnsweredAfterTheKillForOverrunningIsIgnored) {
  pid_t pid = 45;
  const std::uint32_t worker = MakeActor(scheduler_, 5, 1, pid);
  const auto asked = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  (void)scheduler_.StopActor(ActorKill{.id = 5, .no_restart = true, .incarnation = 0}, asked);
  ASSERT_EQ(All<effects::KillWorker>(scheduler_.EndOverdue(asked + kRetireLimit)).size(), 1u);
  EXPECT_TRUE(
      scheduler_.OnActorRetired(worker, ActorKill{.id = 5, .no_restart = true, .incarnation = 0}).empty())
      << "the answer came too late: the worker is being killed";
  const auto runs = All<effects::RunOnWorker>(scheduler_.Submit(Task(100, 1)));
  for (const auto& run : runs) EXPECT_NE(run.worker, worker) << "no task for a worker being killed";
  EXPECT_EQ(All<effects::ActorProcessDied>(scheduler_.OnWorkerExited(45, "signal 9")).size(), 1u);
}

TEST_F(LocalSchedulerTest, WorkersRunningConstructorsDoNotMakeIdleWorkersSurplus) {
  pid_t pid = 70;
  // Two task workers (max_workers) busy with the node's two CPUs.
  std::vector<effects::RunOnWorker> tasks;
  for (std::uint64_t id = 1; id <= 2; ++id) {
    for (const auto& run : All<effects::RunOnWorker>(StartAll(scheduler_.Submit(Task(id, 1)), pid))) {
      tasks.push_back(run);
    }
  }
  ASSERT_EQ(tasks.size(), 2u);
  // Two constructors that take a while, on workers started for them.
  SchedulerEffects submitted;
  for (std::uint64_t actor = 10; actor < 12; ++actor) {
    TaskSpec constructor = Task(actor, 0, TaskKind::kActorCreation);
    constructor.actor_id = actor;
    for (auto& effect : scheduler_.Submit(constructor)) submitted.push_back(effect);
  }
  // Registrations start more workers for the constructors still waiting.
  std::size_t constructing = 0;
  for (int round = 0; round < 5 && !submitted.empty(); ++round) {
    submitted = StartAll(submitted, pid);
    constructing += All<effects::RunOnWorker>(submitted).size();
  }
  ASSERT_EQ(constructing, 2u);
  ASSERT_EQ(scheduler_.workers(), 4u);
  for (const auto& run : tasks) (void)scheduler_.OnTaskDone(run.worker, Done(run.task));
  EXPECT_FALSE(scheduler_.NextDeadline().has_value())
      << "two idle task workers are not above max_workers (2)";
  EXPECT_TRUE(scheduler_.EndOverdue(std::chrono::steady_clock::now() + 10 * kSurplusIdleLimit).empty());
}

TEST(LocalSchedulerGpuTest, AKilledActorHoldingAGpuEndsWithItsProcess) {
  LocalScheduler scheduler{LocalSchedulerConfig{
      .node_id = 0, .total = {{"CPU", 2}, {"GPU", 1}}, .gpu_devices = 1, .max_workers = 2}};
  (void)scheduler.ApplyClusterView({CpuNode(0, 2)});
  pid_t pid = 50;
  TaskSpec constructor = Task(7, 1, TaskKind::kActorCreation);
  constructor.actor_id = 7;
  constructor.resources["GPU"] = 1;
  auto effects = scheduler.Submit(constructor);
  for (const auto& start : All<effects::StartWorker>(effects)) {
    (void)scheduler.OnWorkerSpawned(start.rank, pid++);
    for (auto& effect : scheduler.OnWorkerRegistered(start.rank)) effects.push_back(effect);
  }
  const auto runs = All<effects::RunOnWorker>(effects);
  ASSERT_EQ(runs.size(), 1u);
  TaskOutcome created = Done(runs[0].task);
  created.actor_id = 7;
  (void)scheduler.OnTaskDone(runs[0].worker, created);
  const auto stopped = scheduler.StopActor(ActorKill{.id = 7, .no_restart = true, .incarnation = 0});
  EXPECT_TRUE(All<effects::RetireActor>(stopped).empty());
  ASSERT_EQ(All<effects::KillWorker>(stopped).size(), 1u);
}

TEST_F(LocalSchedulerTest, AnActorKilledWhileItsConstructorRunsEndsWithItsProcess) {
  pid_t pid = 60;
  TaskSpec constructor = Task(1, 1, TaskKind::kActorCreation);
  constructor.actor_id = 3;
  const auto runs = All<effects::RunOnWorker>(StartAll(scheduler_.Submit(constructor), pid));
  ASSERT_EQ(runs.size(), 1u);
  const auto stopped = scheduler_.StopActor(ActorKill{.id = 3, .no_restart = true, .incarnation = 0});
  EXPECT_TRUE(All<effects::RetireActor>(stopped).empty());
  const auto kills = All<effects::KillWorker>(stopped);
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].pid, 60);
}

TEST_F(LocalSchedulerTest, OtherNodesHearOfChangesOnlyWhenThereAreAny) {
  EXPECT_FALSE(scheduler_.NeedsBroadcast());
  (void)scheduler_.Submit(Task(1, 1));
  EXPECT_TRUE(scheduler_.NeedsBroadcast());
  const ResourceUpdate update = scheduler_.MarkBroadcast();
  EXPECT_EQ(update.node_id, 0u);
  EXPECT_EQ(update.queued, 1u);
  EXPECT_FALSE(scheduler_.NeedsBroadcast());
}

// Worker ranks wrap after 65,536 spawns on a node. A rank still in use (a
// long-lived worker's) is skipped: two live processes of one rank would share
// their objects' ids, and the end of either frees both's objects (kOwnerGone).
TEST_F(LocalSchedulerTest, AWrappedWorkerRankStillInUseIsSkipped) {
  pid_t next_pid = 100;
  const auto first = scheduler_.Submit(Task(1, 1));
  const auto first_starts = All<effects::StartWorker>(first);
  ASSERT_EQ(first_starts.size(), 1u);
  const std::uint32_t kept = first_starts[0].rank;
  ASSERT_EQ(All<effects::RunOnWorker>(StartAll(first, next_pid)).size(), 1u);  // busy from now
  // 65,536 starts after the kept one: the counter is back at its rank.
  EXPECT_EQ(RankOfTheStartThatWraps(), kept + 1)
      << "the start that wrapped onto the kept rank took the next";
}

// A rank whose process ended lately is not given out again either: owners
// keep no registration for a rank among the last ends they heard of, and
// would take the new process for the ended one (its borrowed objects freed
// under it).
TEST_F(LocalSchedulerTest, ARankWhoseWorkerEndedLatelyIsNotGivenOutAgain) {
  pid_t next_pid = 100;
  const auto first = scheduler_.Submit(Task(1, 1));
  const auto first_starts = All<effects::StartWorker>(first);
  ASSERT_EQ(first_starts.size(), 1u);
  const std::uint32_t ended = first_starts[0].rank;
  ASSERT_EQ(All<effects::RunOnWorker>(StartAll(first, next_pid)).size(), 1u);
  (void)scheduler_.OnWorkerExited(100, "killed by signal 9");
  EXPECT_EQ(RankOfTheStartThatWraps(), ended + 1)
      << "the start that wrapped onto the ended rank took it";
}

}  // namespace
}  // namespace sray::core
