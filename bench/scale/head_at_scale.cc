// The head's actor directory and a node's scheduler driven by a synthetic
// node count (issue 15, item 4: what grows with the node count, measured
// where a real cluster of that size cannot run here). No transport, no
// processes: the same classes the head and node managers run, fed plain
// values. Prints one line per node count:
//   head_at_scale nodes=N create_us=T kill_us=T forward_us=T update_us=T
//     cluster_view_bytes=B resource_update_bytes=B
// create_us: one actor placed by the directory (Create, then its constructor
// reported done), averaged over 2 actors per node (at least 1,000, at most
// what fits); kill_us:
// one Kill; forward_us: one task a full node hands to another (the scheduler
// looks at every node); update_us: one resource update from another node
// applied; the sizes: the head's cluster view and one node's broadcast.
//
//   head_at_scale [node counts...]   (default 10 100 1000 10000)

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "core/actor_directory.h"
#include "core/local_scheduler.h"
#include "core/protocol.h"

namespace {

using sray::core::ActorCreation;
using sray::core::ActorDirectory;
using sray::core::ActorKill;
using sray::core::LocalScheduler;
using sray::core::LocalSchedulerConfig;
using sray::core::NodeDescription;
using sray::core::TaskOutcome;
using sray::core::TaskSpec;

std::vector<NodeDescription> Nodes(std::uint32_t count) {
  std::vector<NodeDescription> nodes;
  nodes.reserve(count);
  for (std::uint32_t id = 0; id < count; ++id) {
    nodes.push_back(NodeDescription{.node_id = id,
                                    .rank = id,
                                    .hostname = "node" + std::to_string(id) + ".cluster.example",
                                    .total = {{"CPU", 64}, {"memory", 256e9}},
                                    .store_capacity = 64ull << 30});
  }
  return nodes;
}

double MicrosecondsSince(std::chrono::steady_clock::time_point start, std::size_t count) {
  const auto elapsed = std::chrono::steady_clock::now() - start;
  return std::chrono::duration<double, std::micro>(elapsed).count() / static_cast<double>(count);
}

void Measure(std::uint32_t node_count) {
  const auto nodes = Nodes(node_count);
  std::vector<TaskSpec> submitted;
  ActorDirectory::Hooks hooks;
  hooks.submit_to_node = [&](std::uint32_t, TaskSpec spec) { submitted.push_back(std::move(spec)); };
  hooks.stop_worker = [](std::uint32_t, ActorKill) {};
  hooks.notify = [](std::uint32_t, sray::core::ActorChanged) {};
  ActorDirectory directory(nodes, 0, hooks);

  // At least 1,000 for a steady average, never more than fit (64 CPUs a
  // node): a Kill would then place a pending actor too.
  const std::size_t actors =
      std::min<std::size_t>(64 * std::size_t{node_count}, std::max<std::size_t>(1000, 2 * std::size_t{node_count}));
  std::vector<std::uint64_t> ids;
  ids.reserve(actors);
  auto start = std::chrono::steady_clock::now();
  for (std::size_t index = 0; index < actors; ++index) {
    ActorCreation creation;
    creation.factory = "Worker::Create";
    creation.resources = {{"CPU", 1}};
    auto info = directory.Create(creation);
    if (!info.ok()) {
      std::cerr << "head_at_scale: " << info.status().message() << "\n";
      std::exit(1);
    }
    ids.push_back(info->id);
    for (auto& spec : submitted) {
      TaskOutcome outcome = sray::core::FailedOutcome(spec, sray::core::OutcomeKind::kInlineValue, "");
      outcome.actor_id = spec.actor_id;
      outcome.incarnation = spec.incarnation;
      outcome.node = 0;
      outcome.worker_rank = 1;
      directory.OnCreated(std::move(outcome));
    }
    submitted.clear();
  }
  const double create_us = MicrosecondsSince(start, actors);
  start = std::chrono::steady_clock::now();
  for (const auto id : ids) {
    (void)directory.Kill(ActorKill{.id = id, .no_restart = true, .incarnation = 0});
  }
  const double kill_us = MicrosecondsSince(start, ids.size());

  // Node 0 has no CPUs of its own: every task is handed on, after a look at
  // every other node.
  LocalScheduler scheduler(LocalSchedulerConfig{
      .node_id = 0, .total = {{"CPU", 0}}, .gpu_devices = 0, .max_workers = 4});
  std::vector<NodeDescription> view = nodes;
  view[0].total = {{"CPU", 0}};
  (void)scheduler.ApplyClusterView(view);
  constexpr std::size_t kTasks = 10'000;
  start = std::chrono::steady_clock::now();
  std::size_t forwarded = 0;
  for (std::size_t index = 0; index < kTasks; ++index) {
    TaskSpec spec;
    spec.task_id = index + 1;
    spec.function = "noop";
    spec.resources = {{"CPU", 1}};
    forwarded += scheduler.Submit(std::move(spec)).size();
  }
  const double forward_us = MicrosecondsSince(start, kTasks);
  if (forwarded != kTasks) std::cerr << "head_at_scale: " << forwarded << " of " << kTasks << " forwarded\n";

  sray::core::ResourceUpdate update{.node_id = 1, .available = {{"CPU", 3}, {"memory", 1e9}}, .queued = 2};
  start = std::chrono::steady_clock::now();
  for (std::size_t index = 0; index < kTasks; ++index) {
    update.node_id = 1 + static_cast<std::uint32_t>(index % (node_count - 1));
    (void)scheduler.OnResourceUpdate(update);
  }
  const double update_us = MicrosecondsSince(start, kTasks);

  sray::core::ClusterView cluster{.nodes = nodes};
  std::cout << "head_at_scale nodes=" << node_count << " create_us=" << create_us
            << " kill_us=" << kill_us << " forward_us=" << forward_us << " update_us=" << update_us
            << " cluster_view_bytes=" << sray::core::Encode(cluster).size()
            << " resource_update_bytes=" << sray::core::Encode(update).size() << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::uint32_t> counts;
  for (int index = 1; index < argc; ++index) counts.push_back(static_cast<std::uint32_t>(std::stoul(argv[index])));
  if (counts.empty()) counts = {10, 100, 1000, 10000};
  for (const auto count : counts) {
    if (count < 2) {
      std::cerr << "head_at_scale: a node count must be at least 2\n";
      return 2;
    }
    Measure(count);
  }
  return 0;
}
