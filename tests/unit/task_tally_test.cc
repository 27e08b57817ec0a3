#include "core/task_tally.h"

#include <gtest/gtest.h>

#include "core/local_scheduler.h"

#include "cpu_node.h"

namespace sray::core {
namespace {

TaskSpec Task(std::uint64_t id, std::string function, std::string name = "") {
  TaskSpec spec;
  spec.task_id = id;
  spec.function = std::move(function);
  spec.name = std::move(name);
  spec.resources = {{"CPU", 1}};
  return spec;
}

TaskOutcome Outcome(const TaskSpec& spec, OutcomeKind kind) {
  return FailedOutcome(spec, kind, "");
}

TEST(TaskTally, CountsFinishedAndFailedAttemptsByTheNameUsersGaveTheTask) {
  TaskTally tally;
  tally.Record(Outcome(Task(1, "square"), OutcomeKind::kInlineValue));
  tally.Record(Outcome(Task(2, "square"), OutcomeKind::kStoredValue));
  tally.Record(Outcome(Task(3, "square"), OutcomeKind::kTaskThrew));
  tally.Record(Outcome(Task(4, "square"), OutcomeKind::kWorkerDied));
  tally.Record(Outcome(Task(5, "square", "load shard"), OutcomeKind::kInlineValue));
  const auto tasks = tally.With({});
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].function, "load shard");
  EXPECT_EQ(tasks[0].finished, 1u);
  EXPECT_EQ(tasks[1].function, "square");
  EXPECT_EQ(tasks[1].finished, 2u);
  EXPECT_EQ(tasks[1].failed, 2u);
}

TEST(TaskTally, AddsWhatTheSchedulerHoldsNowQueuedAndRunning) {
  // One CPU, one worker: tasks queue until it registers, then all go to it
  // (the first runs, the others wait in its line).
  LocalScheduler scheduler(LocalSchedulerConfig{
      .node_id = 0, .total = {{"CPU", 1}}, .gpu_devices = 0, .max_workers = 1});
  (void)scheduler.ApplyClusterView({CpuNode(0, 1)});
  auto started = scheduler.Submit(Task(1, "square"));
  (void)scheduler.Submit(Task(2, "square"));
  (void)scheduler.Submit(Task(3, "cube"));
  TaskTally tally;
  tally.Record(Outcome(Task(9, "cube"), OutcomeKind::kInlineValue));
  auto tasks = tally.With(scheduler.CurrentTasks());
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].function, "cube");
  EXPECT_EQ(tasks[0].queued, 1u);
  EXPECT_EQ(tasks[0].finished, 1u);
  EXPECT_EQ(tasks[1].function, "square");
  EXPECT_EQ(tasks[1].queued, 2u);
  EXPECT_EQ(tasks[1].running, 0u);

  for (const auto& effect : started) {
    if (const auto* start = std::get_if<effects::StartWorker>(&effect)) {
      (void)scheduler.OnWorkerSpawned(start->rank, 100);
      (void)scheduler.OnWorkerRegistered(start->rank);
    }
  }
  tasks = tally.With(scheduler.CurrentTasks());
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].running, 1u);
  EXPECT_EQ(tasks[0].queued, 0u);
  EXPECT_EQ(tasks[1].running, 2u);
  EXPECT_EQ(tasks[1].queued, 0u);
}

FunctionTasks Method(std::string name, std::uint64_t queued, std::uint64_t running, std::uint64_t finished,
                     std::uint64_t failed) {
  return FunctionTasks{.function = std::move(name), .queued = queued, .running = running,
                       .finished = finished, .failed = failed};
}

// Actors count their own calls; their latest counts are added by method
// name, each actor's newest replacing its older. A dead incarnation's calls
// stay counted with nothing queued or running, a late tally of it changes
// nothing, and a restarted actor counts anew on top.
TEST(TaskTally, AddsEachActorsLatestCallCountsByMethod) {
  TaskTally tally;
  tally.Record(Outcome(Task(1, "square"), OutcomeKind::kInlineValue));
  tally.RecordActorCalls({.actor_id = 7, .incarnation = 0, .methods = {Method("Counter::Add", 1, 1, 3, 0)}});
  tally.RecordActorCalls({.actor_id = 7, .incarnation = 0, .methods = {Method("Counter::Add", 2, 1, 5, 1)}});
  tally.RecordActorCalls({.actor_id = 8, .incarnation = 0, .methods = {Method("Counter::Add", 0, 0, 10, 0),
                                                                       Method("Counter::Value", 0, 0, 1, 0)}});
  auto tasks = tally.With({});
  ASSERT_EQ(tasks.size(), 3u);
  EXPECT_EQ(tasks[0].function, "Counter::Add");
  EXPECT_EQ(tasks[0].queued, 2u);
  EXPECT_EQ(tasks[0].running, 1u);
  EXPECT_EQ(tasks[0].finished, 15u);
  EXPECT_EQ(tasks[0].failed, 1u);
  EXPECT_EQ(tasks[1].function, "Counter::Value");
  EXPECT_EQ(tasks[1].finished, 1u);
  EXPECT_EQ(tasks[2].function, "square");
  EXPECT_EQ(tasks[2].finished, 1u);

  tally.ActorEnded(7, 0);
  tally.RecordActorCalls({.actor_id = 7, .incarnation = 0, .methods = {Method("Counter::Add", 9, 9, 9, 9)}});
  tasks = tally.With({});
  EXPECT_EQ(tasks[0].queued, 0u);
  EXPECT_EQ(tasks[0].running, 0u);
  EXPECT_EQ(tasks[0].finished, 15u);
  EXPECT_EQ(tasks[0].failed, 1u);

  tally.RecordActorCalls({.actor_id = 7, .incarnation = 1, .methods = {Method("Counter::Add", 0, 1, 2, 0)}});
  tasks = tally.With({});
  EXPECT_EQ(tasks[0].running, 1u);
  EXPECT_EQ(tasks[0].finished, 17u) << "the restart's calls add to the dead incarnation's";
  EXPECT_EQ(tasks[0].failed, 1u);
}

// A node whose job makes and ends actors all day keeps a bounded memory of
// them: late tallies come within milliseconds of an end.
TEST(TaskTally, RemembersOnlyTheActorsThatEndedLast) {
  TaskTally tally;
  for (std::uint64_t actor = 1; actor <= 1'500; ++actor) {
    tally.RecordActorCalls(
        {.actor_id = actor, .incarnation = 0, .methods = {Method("Counter::Add", 0, 0, 1, 0)}});
    tally.ActorEnded(actor, 0);
  }
  EXPECT_EQ(tally.EndedActorsRemembered(), 1'000u);
  // The newest still drop a late tally of their ended incarnation.
  tally.RecordActorCalls(
      {.actor_id = 1'500, .incarnation = 0, .methods = {Method("Counter::Add", 4, 4, 4, 4)}});
  const auto tasks = tally.With({});
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].queued, 0u);
  EXPECT_EQ(tasks[0].finished, 1'500u);
}

}  // namespace
}  // namespace sray::core
