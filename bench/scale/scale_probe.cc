// The sray side of bench/scale: under `sray run -N n`, how long wire-up,
// 10,000 no-op tasks over all nodes, and placing two actors per node take,
// and where the tasks and actors ran. Prints, on the driver only,
//   scale_probe nodes=N main_ns=T init_ns=T warm_ns=T tasks_ns=T tasks_done_ns=T
//     task_nodes=K task_min=A task_max=B actors=M actors_ns=T actors_done_ns=T
//     actor_nodes=K actor_min=A actor_max=B driver_rss_kib=R
// (CLOCK_REALTIME, so bench/scale/run can take them from its own start).

#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <sray/api.h>

#include "common/every_node.h"

namespace {

std::int64_t RealtimeNanoseconds() {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return std::int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

class Placed {
 public:
  static Placed* Create() { return new Placed(); }
  std::uint32_t Node() const { return sray::CurrentNode().node_id; }
};

std::int64_t ResidentKib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return 0;
}

// How many of `nodes` got work, and the least and most any node got.
struct Spread {
  std::size_t nodes_used = 0;
  std::size_t least = 0;
  std::size_t most = 0;
};

Spread SpreadOf(const std::vector<std::uint32_t>& where, std::uint32_t nodes) {
  std::map<std::uint32_t, std::size_t> per_node;
  for (std::uint32_t node = 0; node < nodes; ++node) per_node[node] = 0;
  for (const std::uint32_t node : where) ++per_node[node];
  Spread spread{.nodes_used = 0, .least = where.size(), .most = 0};
  for (const auto& [node, count] : per_node) {
    if (count > 0) ++spread.nodes_used;
    spread.least = std::min(spread.least, count);
    spread.most = std::max(spread.most, count);
  }
  return spread;
}

}  // namespace

SRAY_REMOTE(Placed::Create, &Placed::Node);

int main(int argc, char** argv) {
  const std::int64_t main_ns = RealtimeNanoseconds();
  sray::Init(argc, argv);
  const std::int64_t init_ns = RealtimeNanoseconds();
  const sray::NodeInfo self = sray::CurrentNode();
  const std::uint32_t nodes = self.num_nodes;
  // Warm-up: every node has a worker before the timed part.
  (void)sray_bench::RunOnEveryNode(nodes);
  const std::int64_t warm_ns = RealtimeNanoseconds();

  constexpr int kTasks = 10'000;
  std::vector<sray::ObjectRef<std::uint32_t>> tasks;
  tasks.reserve(kTasks);
  const std::int64_t tasks_ns = RealtimeNanoseconds();
  for (int index = 0; index < kTasks; ++index) tasks.push_back(sray::Task(sray_bench::node_of_task).Remote());
  const std::vector<std::uint32_t> task_nodes = sray::Get(tasks);
  const std::int64_t tasks_done_ns = RealtimeNanoseconds();
  const Spread task_spread = SpreadOf(task_nodes, nodes);

  const std::uint32_t actor_count = 2 * nodes;
  const std::int64_t actors_ns = RealtimeNanoseconds();
  std::vector<sray::ActorHandle<Placed>> actors;
  std::vector<sray::ObjectRef<std::uint32_t>> first_calls;
  for (std::uint32_t index = 0; index < actor_count; ++index) {
    actors.push_back(sray::Actor(Placed::Create).Remote());
    first_calls.push_back(actors.back().Task(&Placed::Node).Remote());
  }
  const std::vector<std::uint32_t> actor_nodes = sray::Get(first_calls);
  const std::int64_t actors_done_ns = RealtimeNanoseconds();
  const Spread actor_spread = SpreadOf(actor_nodes, nodes);
  const std::int64_t driver_rss_kib = ResidentKib();
  for (auto& actor : actors) actor.Kill();

  std::cout << "scale_probe nodes=" << nodes << " main_ns=" << main_ns << " init_ns=" << init_ns
            << " warm_ns=" << warm_ns << " tasks_ns=" << tasks_ns
            << " tasks_done_ns=" << tasks_done_ns << " task_nodes=" << task_spread.nodes_used
            << " task_min=" << task_spread.least << " task_max=" << task_spread.most
            << " actors=" << actor_count << " actors_ns=" << actors_ns
            << " actors_done_ns=" << actors_done_ns << " actor_nodes=" << actor_spread.nodes_used
            << " actor_min=" << actor_spread.least << " actor_max=" << actor_spread.most
            << " driver_rss_kib=" << driver_rss_kib << std::endl;
  sray::Shutdown();
  return 0;
}
