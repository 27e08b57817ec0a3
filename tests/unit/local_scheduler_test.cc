// The node manager's decisions, as plain values: what LocalScheduler asks
// the node manager to do for each event.

#include "core/local_scheduler.h"

#include <gtest/gtest.h>

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

TEST(LocalScheduler, WorkersStartedAreCappedByMaxWorkers) {
  LocalScheduler scheduler{LocalSchedulerConfig{
      .node_id = 0, .total = {{"CPU", 2}}, .gpu_devices = 0, .max_workers = 2}};
  // Nothing is dispatched before the cluster view: all six wait for it.
  for (std::uint64_t id = 1; id <= 6; ++id) EXPECT_TRUE(scheduler.Submit(Task(id, 0.25)).empty());
  const auto effects = scheduler.ApplyClusterView({CpuNode(0, 2)});
  EXPECT_EQ(All<effects::StartWorker>(effects).size(), 2u);
}

TEST_F(LocalSchedulerTest, ADeadWorkersTaskFailsRetryablyAndTheTasksBehindItGoBack) {
  LocalScheduler busy{LocalSchedulerConfig{
      .node_id = 0, .total = {{"CPU", 1}}, .gpu_devices = 0, .max_workers = 1}};
  (void)busy.ApplyClusterView({CpuNode(0, 1)});
  const auto first = busy.Submit(Task(1, 1));
  const auto start = All<effects::StartWorker>(first).at(0);
  (void)busy.OnWorkerSpawned(start.rank, 77);
  ASSERT_EQ(All<effects::RunOnWorker>(busy.OnWorkerRegistered(start.rank)).size(), 1u);
  // No room left: the next ones wait in the busy worker (pipelined).
  const auto second = busy.Submit(Task(2, 1));
  ASSERT_EQ(All<effects::RunOnWorker>(second).size(), 1u);

  const auto exited = busy.OnWorkerExited(77, "signal 9");
  ASSERT_EQ(All<effects::ForgetWorker>(exited).size(), 1u);
  const auto delivered = All<effects::DeliverOutcome>(exited);
  ASSERT_EQ(delivered.size(), 1u);
  EXPECT_EQ(delivered[0].outcome.task_id, 1u);
  EXPECT_EQ(static_cast<OutcomeKind>(delivered[0].outcome.kind), OutcomeKind::kWorkerDied);
  EXPECT_EQ(delivered[0].outcome.pid, 77);
  // Task 2 never started: it is queued again and a new worker starts for it.
  EXPECT_EQ(All<effects::StartWorker>(exited).size(), 1u);
  EXPECT_EQ(busy.queued(), 1u);
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

TEST_F(LocalSchedulerTest, AnActorsWorkerKeepsItsGrantAndItsDeathIsReported) {
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

  const auto killed =
      scheduler_.StopActor(ActorKill{.id = 9, .no_restart = true, .incarnation = 0});
  const auto kills = All<effects::KillWorker>(killed);
  ASSERT_EQ(kills.size(), 1u);
  EXPECT_EQ(kills[0].pid, 20);
  const auto exited = scheduler_.OnWorkerExited(20, "signal 9");
  const auto deaths = All<effects::ActorProcessDied>(exited);
  ASSERT_EQ(deaths.size(), 1u);
  EXPECT_EQ(deaths[0].death.id, 9u);
  EXPECT_EQ(deaths[0].death.cause, "ended with signal 9");
  EXPECT_EQ(scheduler_.available().at("CPU"), 2.0);
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

}  // namespace
}  // namespace sray::core
