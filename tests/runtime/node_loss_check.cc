// A job that loses a whole non-head node (its manager and workers killed by
// the test script) and goes on: tasks in flight run again elsewhere, results
// that lived only there are rebuilt from lineage, actors that lived there
// restart on the other nodes, and new work avoids the lost node.
//
//   node_loss_check SIGNAL_FILE
//
// Prints "node-loss: victim PID" (node 2's manager, found through a task's
// parent) and "node-loss: ready" once 600 tasks that wait for SIGNAL_FILE are
// spread over the nodes; the script then kills that node and creates
// SIGNAL_FILE. "ok: ..." lines follow
// (tests/local/test_node_loss.sh counts them).

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <sray/api.h>

#include "check.h"

namespace {

using sray::check::Expect;
using sray::check::Fail;

std::uint32_t Node() { return sray::CurrentNode().node_id; }

// Where a task runs: its node and its node manager's pid (its parent).
std::vector<std::int64_t> whereabouts(std::int64_t milliseconds) {
  std::this_thread::sleep_for(std::chrono::milliseconds(milliseconds));
  return {Node(), static_cast<std::int64_t>(::getppid())};
}

// A 1 MiB result kept in the store of the node that made it: word 0 names
// that node, the rest follow from the seed.
std::vector<std::uint64_t> make_block(std::uint64_t seed) {
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::vector<std::uint64_t> block(128 * 1024);
  std::iota(block.begin(), block.end(), seed * 1000003);
  block[0] = Node();
  return block;
}

// make_block, noting "SEED NODE" in `notes` (one short append: whole lines
// from any process), so the driver knows where each block lives without
// reading it (a read would leave a copy on the reader's node).
std::vector<std::uint64_t> make_noted_block(std::uint64_t seed, const std::string& notes) {
  auto block = make_block(seed);
  std::ofstream(notes, std::ios::app)
      << (std::to_string(seed) + " " + std::to_string(Node()) + "\n") << std::flush;
  return block;
}

// Runs until the script has killed node 2 (SIGNAL_FILE exists): the tasks
// node 2 holds then are surely lost with it.
std::uint64_t sum_plus(const std::vector<std::uint64_t>& values, std::uint64_t index, const std::string& signal_file) {
  while (!std::filesystem::exists(signal_file)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return std::accumulate(values.begin(), values.end(), std::uint64_t{0}) + index;
}

// A block passed as an argument: the node that made it, or 99 when it is
// not the block of `seed`.
std::uint64_t maker_of_block(const std::vector<std::uint64_t>& block, std::uint64_t seed) {
  const bool intact = block.size() == 128 * 1024 && block[1] == seed * 1000003 + 1 &&
                      block.back() == seed * 1000003 + 128 * 1024 - 1;
  return intact ? block[0] : 99;
}

std::uint32_t node_of_task(std::uint64_t /*index*/) {
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return Node();
}

class Counter {
 public:
  static Counter* Create() { return new Counter(); }
  // {calls so far, node}
  std::vector<std::uint64_t> Add() { return {++calls_, Node()}; }
  // The node that made a block passed as an argument (99 when it is not the
  // block of `seed`), as maker_of_block.
  std::uint64_t MakerOf(const std::vector<std::uint64_t>& block, std::uint64_t seed) {
    const bool intact = block.size() == 128 * 1024 && block[1] == seed * 1000003 + 1 &&
                        block.back() == seed * 1000003 + 128 * 1024 - 1;
    return intact ? block[0] : 99;
  }
  // An object this actor's process owns (a 1 MiB Put), for the driver to
  // borrow: wrapped in a vector so that it travels as a reference.
  std::vector<sray::ObjectRef<std::vector<std::uint64_t>>> Stash() {
    return {sray::Put(std::vector<std::uint64_t>(128 * 1024, 5))};
  }
  // Borrows the objects of `refs` until this instance ends.
  bool Keep(std::vector<sray::ObjectRef<std::vector<std::uint64_t>>> refs) {
    kept_.insert(kept_.end(), refs.begin(), refs.end());
    return true;
  }

 private:
  std::uint64_t calls_ = 0;
  std::vector<sray::ObjectRef<std::vector<std::uint64_t>>> kept_;
};

std::uint64_t InStores() {
  std::uint64_t total = 0;
  for (const auto& node : sray::StoreUsage()) total += node.in_memory + node.spilled;
  return total;
}

using Block = std::vector<std::uint64_t>;

// Blocks made by make_noted_block, with their seeds, and the seeds of those
// node 2 made (the checks after the loss need some there).
struct NotedBlocks {
  std::vector<sray::ObjectRef<Block>> refs;
  std::vector<std::uint64_t> seeds;
  std::set<std::uint64_t> seeds_of_node_2;
};

// `count` noted blocks, some of them made on node 2. Where tasks run is the
// scheduler's choice: a batch that node 2 made none of (it happened once in
// CI under srun, for a batch of 20) is dropped and made again with new seeds
// from `next_seed`.
NotedBlocks MakeNotedBlocksSomeOnNode2(std::uint64_t& next_seed, std::uint64_t count,
                                       const std::string& notes) {
  for (int batch = 0; batch < 10; ++batch) {
    NotedBlocks made;
    for (std::uint64_t index = 0; index < count; ++index) {
      made.seeds.push_back(next_seed);
      made.refs.push_back(sray::Task(make_noted_block).SetMaxRetries(3).Remote(next_seed, notes));
      ++next_seed;
    }
    (void)sray::Wait(made.refs, made.refs.size(), std::chrono::seconds(60));
    const std::set<std::uint64_t> ours(made.seeds.begin(), made.seeds.end());
    std::ifstream noted(notes);
    std::uint64_t seed = 0;
    std::uint32_t node = 0;
    while (noted >> seed >> node) {
      if (node == 2 && ours.contains(seed)) made.seeds_of_node_2.insert(seed);
    }
    if (!made.seeds_of_node_2.empty()) return made;
  }
  Fail("node 2 made none of 10 batches of " + std::to_string(count) + " blocks");
}

// The makers named by reads of `blocks` (one answer per block, in order):
// every block read intact (below 98), and none of those node 2 made says it
// came from node 2, so each was rebuilt elsewhere.
bool RebuiltWhereLost(const std::vector<std::uint64_t>& makers, const NotedBlocks& blocks) {
  bool rebuilt = makers.size() == blocks.seeds.size();
  for (std::uint64_t index = 0; rebuilt && index < makers.size(); ++index) {
    rebuilt = makers[index] < 98 &&
              (makers[index] != 2 || !blocks.seeds_of_node_2.contains(blocks.seeds[index]));
  }
  return rebuilt;
}

}  // namespace

// Calls `reader`'s MakerOf with refs[0], an object this task borrows: the
// actor's answer, or 98 when the call fails with ObjectLostError.
std::uint64_t ask_reader(sray::ActorHandle<Counter> reader,
                         std::vector<sray::ObjectRef<std::vector<std::uint64_t>>> refs,
                         std::uint64_t seed) {
  try {
    return sray::Get(reader.Task(&Counter::MakerOf).Remote(refs[0], seed),
                     std::chrono::seconds(90));
  } catch (const sray::ObjectLostError&) {
    return 98;
  }
}

// Reads refs[0], an object this task borrows: the node that made it, 99 when
// it is not the block of `seed`, or 98 when the read fails with
// ObjectLostError.
std::uint64_t read_borrowed(const std::vector<sray::ObjectRef<std::vector<std::uint64_t>>>& refs,
                            std::uint64_t seed) {
  try {
    return maker_of_block(sray::Get(refs[0], std::chrono::seconds(90)), seed);
  } catch (const sray::ObjectLostError&) {
    return 98;
  }
}

// A borrower on another node reading an object whose owner is gone: 1 when
// its Get fails with ObjectLostError, 0 when it returns.
std::uint32_t read_orphan(const std::vector<sray::ObjectRef<std::vector<std::uint64_t>>>& refs) {
  try {
    (void)sray::Get(refs[0], std::chrono::seconds(60));
    return 0;
  } catch (const sray::ObjectLostError&) {
    return 1;
  }
}

SRAY_REMOTE(whereabouts, make_block, make_noted_block, sum_plus, maker_of_block, node_of_task,
            read_orphan, ask_reader, read_borrowed);
SRAY_REMOTE(Counter::Create, &Counter::Add, &Counter::MakerOf, &Counter::Stash, &Counter::Keep);

int main(int argc, char** argv) {
  sray::Init(argc, argv);
  if (argc != 2) Fail("usage: node_loss_check SIGNAL_FILE");
  const std::string signal_file = argv[1];

  // Node 2's manager, for the script.
  std::int64_t victim = 0;
  for (int round = 0; round < 20 && victim == 0; ++round) {
    std::vector<sray::ObjectRef<std::vector<std::int64_t>>> probes;
    for (int task = 0; task < 12; ++task) probes.push_back(sray::Task(whereabouts).Remote(200));
    for (const auto& where : sray::Get(probes)) {
      if (where[0] == 2) victim = where[1];
    }
  }
  if (victim == 0) Fail("no task ran on node 2");

  // Results kept where they were made, not read yet (a read would copy them
  // to node 0).
  // The first 30 are read after the loss, the other 30 passed to new tasks.
  std::vector<sray::ObjectRef<std::vector<std::uint64_t>>> blocks;
  std::vector<sray::ObjectRef<std::vector<std::uint64_t>>> argument_blocks;
  const std::string notes = signal_file + ".blocks";
  for (std::uint64_t seed = 0; seed < 60; ++seed) {
    (seed < 30 ? blocks : argument_blocks)
        .push_back(sray::Task(make_block).SetMaxRetries(3).Remote(seed));
  }
  std::uint64_t next_seed = 60;
  // Passed to an actor by the driver, then to tasks that pass them on to it.
  const NotedBlocks actor_blocks = MakeNotedBlocksSomeOnNode2(next_seed, 30, notes);
  const NotedBlocks borrowed_blocks = MakeNotedBlocksSomeOnNode2(next_seed, 20, notes);
  const NotedBlocks blocks_read_by_borrowers = MakeNotedBlocksSomeOnNode2(next_seed, 20, notes);
  (void)sray::Wait(blocks, blocks.size(), std::chrono::seconds(60));
  (void)sray::Wait(argument_blocks, argument_blocks.size(), std::chrono::seconds(60));
  std::uint64_t objects_on_node_2 = 0;
  for (const auto& node : sray::StoreUsage()) {
    if (node.node_id == 2) objects_on_node_2 = node.objects;
  }
  Expect(objects_on_node_2 > 0, "node 2's store holds " + std::to_string(objects_on_node_2) +
                                    " results before the node is lost");

  std::vector<sray::ActorHandle<Counter>> counters;
  for (int index = 0; index < 6; ++index) {
    counters.push_back(sray::Actor(Counter::Create).SetMaxRestarts(1).SetMaxTaskRetries(2).Remote());
  }
  std::map<int, std::uint64_t> first_node;
  for (int index = 0; index < 6; ++index) {
    first_node[index] = sray::Get(counters[static_cast<std::size_t>(index)].Task(&Counter::Add).Remote())[1];
  }

  // An actor that stays.
  int survivor = -1;
  for (int index = 0; index < 6 && survivor < 0; ++index) {
    if (first_node[index] != 2) survivor = index;
  }
  Expect(survivor >= 0, "an actor lives on a node that stays");
  auto& reader = counters[static_cast<std::size_t>(survivor)];

  // Objects owned by a process of node 2 (an actor there), borrowed by the
  // driver before the loss.
  std::vector<sray::ObjectRef<std::vector<std::uint64_t>>> orphans;
  for (int index = 0; index < 6; ++index) {
    if (first_node[index] != 2) continue;
    orphans = sray::Get(counters[static_cast<std::size_t>(index)].Task(&Counter::Stash).Remote());
    break;
  }
  Expect(!orphans.empty(), "an actor on node 2 lends the driver an object it owns");

  // An object the driver owns that an actor on node 2 borrows (it keeps the
  // reference): 1.1 MiB in node 0's store (words above 2^32 take 9 bytes).
  constexpr std::uint64_t kLentBytes = 128 * 1024 * 9;
  std::optional<sray::ObjectRef<std::vector<std::uint64_t>>> lent_to_node_2 =
      sray::Put(std::vector<std::uint64_t>(128 * 1024, std::uint64_t{1} << 40));
  for (int index = 0; index < 6; ++index) {
    if (first_node[index] != 2) continue;
    Expect(sray::Get(counters[static_cast<std::size_t>(index)]
                         .Task(&Counter::Keep)
                         .Remote(std::vector<sray::ObjectRef<std::vector<std::uint64_t>>>{
                             *lent_to_node_2})),
           "an actor on node 2 borrows an object the driver owns");
    break;
  }
  Expect(sray::Get(orphans[0]).size() == 128 * 1024, "the borrowed object reads before the loss");

  std::vector<std::uint64_t> values(256 * 1024, 3);  // 2 MiB, Put on node 0
  const std::uint64_t values_sum = 3ULL * values.size();
  auto shared = sray::Put(values);
  std::vector<sray::ObjectRef<std::uint64_t>> in_flight;
  for (std::uint64_t index = 0; index < 600; ++index) {
    in_flight.push_back(sray::Task(sum_plus).SetMaxRetries(3).Remote(shared, index, signal_file));
  }
  std::cout << "node-loss: victim " << victim << std::endl;
  std::cout << "node-loss: ready" << std::endl;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!std::filesystem::exists(signal_file)) {
    if (std::chrono::steady_clock::now() > deadline) Fail("the script never killed node 2");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  bool right = true;
  const auto sums = sray::Get(in_flight, std::chrono::seconds(120));
  for (std::uint64_t index = 0; index < sums.size(); ++index) right = right && sums[index] == values_sum + index;
  Expect(right, "600 tasks running or queued on every node when node 2 was lost all finish with the right "
                "result (those node 2 held ran again elsewhere)");

  bool intact = true;
  bool none_on_node_2 = true;
  const auto read = sray::Get(blocks, std::chrono::seconds(120));
  for (std::uint64_t seed = 0; seed < read.size(); ++seed) {
    intact = intact && read[seed].size() == 128 * 1024 && read[seed][1] == seed * 1000003 + 1 &&
             read[seed].back() == seed * 1000003 + 128 * 1024 - 1;
    none_on_node_2 = none_on_node_2 && read[seed][0] != 2;
  }
  Expect(intact && none_on_node_2, "the 30 results come back intact, those of node 2 rebuilt on another node");

  // Arguments that lived only on node 2: each task that cannot read one has
  // its owner rebuild it, then runs again.
  std::vector<sray::ObjectRef<std::uint64_t>> makers;
  for (std::uint64_t index = 0; index < argument_blocks.size(); ++index) {
    makers.push_back(sray::Task(maker_of_block).Remote(argument_blocks[index], index + 30));
  }
  bool arguments_intact = true;
  for (const std::uint64_t maker : sray::Get(makers, std::chrono::seconds(120))) {
    arguments_intact = arguments_intact && maker != 99 && maker != 2;
  }
  Expect(arguments_intact,
         "30 new tasks whose argument objects were made before the loss finish, those of "
         "node 2 rebuilt on another node first");

  bool answered = true;
  bool moved = true;
  int were_on_node_2 = 0;
  for (int index = 0; index < 6; ++index) {
    const auto answer = sray::Get(counters[static_cast<std::size_t>(index)].Task(&Counter::Add).Remote(),
                                  std::chrono::seconds(60));
    if (first_node[index] == 2) {
      ++were_on_node_2;
      // Restarted elsewhere: a fresh instance.
      moved = moved && answer[1] != 2 && answer[0] == 1;
    } else {
      answered = answered && answer[0] == 2 && answer[1] == first_node[index];
    }
  }
  Expect(answered && moved && were_on_node_2 > 0,
         "actors answer after the loss: " + std::to_string(were_on_node_2) +
             " of node 2 restarted on other nodes, the others kept their state");

  // Actor calls whose argument lived only on node 2: the caller rebuilds it
  // while the actor waits, in the call's place.
  std::vector<sray::ObjectRef<std::uint64_t>> made_after;
  for (std::uint64_t index = 0; index < actor_blocks.refs.size(); ++index) {
    made_after.push_back(
        reader.Task(&Counter::MakerOf).Remote(actor_blocks.refs[index], actor_blocks.seeds[index]));
  }
  bool actor_arguments_intact = true;
  const auto answers = sray::Get(made_after, std::chrono::seconds(120));
  for (std::uint64_t index = 0; index < answers.size(); ++index) {
    actor_arguments_intact =
        actor_arguments_intact && answers[index] != 99 &&
        (answers[index] != 2 || !actor_blocks.seeds_of_node_2.contains(actor_blocks.seeds[index]));
  }
  Expect(actor_arguments_intact,
         "30 actor calls whose argument objects were made before the loss answer, the " +
             std::to_string(actor_blocks.seeds_of_node_2.size()) +
             " of node 2 rebuilt on another node first");

  // The same when the actor's caller only borrows the argument (a task the
  // driver passed it to): the actor asks the caller, which asks the owner
  // (the call failed with ObjectLostError before).
  std::vector<sray::ObjectRef<std::uint64_t>> passed_on;
  for (std::uint64_t index = 0; index < borrowed_blocks.refs.size(); ++index) {
    passed_on.push_back(
        sray::Task(ask_reader)
            .Remote(reader, std::vector<sray::ObjectRef<Block>>{borrowed_blocks.refs[index]},
                    borrowed_blocks.seeds[index]));
  }
  Expect(RebuiltWhereLost(sray::Get(passed_on, std::chrono::seconds(120)), borrowed_blocks),
         "20 actor calls from tasks that borrowed their argument objects answer, the " +
             std::to_string(borrowed_blocks.seeds_of_node_2.size()) +
             " of node 2 rebuilt by their owner first");

  // A task that borrows an object whose only copy was on node 2 and reads it:
  // its owner rebuilds it first (the read failed with ObjectLostError before).
  std::vector<sray::ObjectRef<std::uint64_t>> borrowers_read;
  for (std::uint64_t index = 0; index < blocks_read_by_borrowers.refs.size(); ++index) {
    borrowers_read.push_back(
        sray::Task(read_borrowed)
            .Remote(std::vector<sray::ObjectRef<Block>>{blocks_read_by_borrowers.refs[index]},
                    blocks_read_by_borrowers.seeds[index]));
  }
  Expect(RebuiltWhereLost(sray::Get(borrowers_read, std::chrono::seconds(120)),
                          blocks_read_by_borrowers),
         "20 tasks read objects they borrow that were made before the loss, the " +
             std::to_string(blocks_read_by_borrowers.seeds_of_node_2.size()) +
             " of node 2 rebuilt by their owner first");

  // The owner died with its node: reads fail at once with ObjectLostError,
  // in the driver and in a borrower on another node, instead of waiting.
  const auto asked = std::chrono::steady_clock::now();
  std::string driver_saw = "no error";
  try {
    (void)sray::Get(orphans[0], std::chrono::seconds(60));
  } catch (const sray::ObjectLostError& error) {
    driver_saw = std::string("ObjectLostError: ") + error.what();
  } catch (const std::exception& error) {
    driver_saw = std::string("another error: ") + error.what();
  }
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - asked);
  Expect(driver_saw.starts_with("ObjectLostError") && driver_saw.find("node 2 was lost") != std::string::npos &&
             waited < std::chrono::seconds(10),
         "the driver's read of an object whose owner was lost with node 2 fails in " +
             std::to_string(waited.count()) + " ms: " + driver_saw);
  Expect(sray::Get(sray::Task(read_orphan).Remote(orphans), std::chrono::seconds(90)) == 1,
         "a task borrowing that object fails its read with ObjectLostError");

  std::vector<sray::ObjectRef<std::uint32_t>> later;
  for (std::uint64_t index = 0; index < 300; ++index) later.push_back(sray::Task(node_of_task).Remote(index));
  std::set<std::uint32_t> nodes;
  for (const std::uint32_t node : sray::Get(later, std::chrono::seconds(60))) nodes.insert(node);
  Expect(nodes.size() == 2, "300 new tasks finish on the 2 nodes left, none waits for the lost one");

  std::set<std::uint32_t> reported;
  for (const auto& node : sray::StoreUsage()) reported.insert(node.node_id);
  Expect(!reported.contains(2) && reported.contains(0), "StoreUsage reports the nodes left");

  // The borrower died with its node without giving its registration back:
  // once the driver drops its own reference, nothing may keep the object
  // (it stayed to the end of the job before).
  const std::uint64_t with_lent = InStores();
  lent_to_node_2.reset();
  const auto freed_by = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (InStores() + kLentBytes > with_lent && std::chrono::steady_clock::now() < freed_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Expect(InStores() + kLentBytes <= with_lent,
         "an object only an actor lost with node 2 borrowed is freed when the driver drops it "
         "(stores held " +
             std::to_string(with_lent) + " bytes, now " + std::to_string(InStores()) + ")");
  return 0;
}
