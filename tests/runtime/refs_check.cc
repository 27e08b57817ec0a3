// Job-wide checks of ObjectRefs inside values (vectors of refs, structs
// holding refs) as task arguments, results, Put values and actor state,
// across processes and nodes, with the owner's reference counting: run by
// the local test under `sray run -N3`. Prints "ok: <what>" lines, or
// "FAIL: ..." and exits 1.
//
//   refs_check values

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sray/api.h>

#include "check.h"

namespace {

using sray::check::Expect;
using sray::check::Fail;

using Block = std::vector<std::uint64_t>;
using BlockRef = sray::ObjectRef<Block>;
// 256 Ki words above 2^32 (9 bytes each in msgpack): 2.25 MiB, in the store.
constexpr std::uint64_t kWords = 256 * 1024;

Block MakeBlock(std::uint64_t seed) {
  Block block(kWords);
  for (std::uint64_t index = 0; index < kWords; ++index) {
    block[index] = (std::uint64_t{1} << 40) + seed * 1000003 + index;
  }
  return block;
}

std::uint64_t SumOf(const Block& block) {
  return std::accumulate(block.begin(), block.end(), std::uint64_t{0});
}

std::uint64_t ExpectedSum(std::uint64_t first_seed, std::uint64_t count) {
  std::uint64_t sum = 0;
  for (std::uint64_t seed = first_seed; seed < first_seed + count; ++seed)
    sum += SumOf(MakeBlock(seed));
  return sum;
}

struct Batch {
  std::string label;
  std::vector<BlockRef> blocks;
  sray::ObjectRef<std::int64_t> extra;
  MSGPACK_DEFINE(label, blocks, extra)
};

// Gets every block: the refs arrive unresolved, owned by another process.
std::uint64_t sum_blocks(std::vector<BlockRef> refs, std::int64_t sleep_milliseconds) {
  std::this_thread::sleep_for(std::chrono::milliseconds(sleep_milliseconds));
  std::uint64_t sum = 0;
  for (const auto& block : sray::Get(refs)) sum += SumOf(block);
  return sum;
}

// Puts `count` blocks here (this worker owns them) and returns their refs.
std::vector<BlockRef> make_blocks(std::uint64_t first_seed, std::uint64_t count) {
  std::vector<BlockRef> refs;
  for (std::uint64_t seed = first_seed; seed < first_seed + count; ++seed) {
    refs.push_back(sray::Put(MakeBlock(seed)));
  }
  return refs;
}

// make_blocks after `sleep_milliseconds`; creates the file `made` once the
// blocks are in the store.
std::vector<BlockRef> make_blocks_later(std::uint64_t first_seed, std::uint64_t count,
                                        std::int64_t sleep_milliseconds, std::string made) {
  std::this_thread::sleep_for(std::chrono::milliseconds(sleep_milliseconds));
  auto refs = make_blocks(first_seed, count);
  std::ofstream{made};
  return refs;
}

// A borrower passing borrowed refs on, to a task of its own.
std::uint64_t pass_on(std::vector<BlockRef> refs) {
  return sray::Get(sray::Task(sum_blocks).Remote(refs, 0));
}

std::uint64_t block_sum(Block block) {
  return SumOf(block);
}

// An ObjectRef parameter: the ref itself, not its value.
std::uint64_t sum_through_ref(BlockRef ref) {
  return SumOf(sray::Get(ref));
}

std::int64_t count_valid(std::vector<BlockRef> refs) {
  std::int64_t valid = 0;
  for (const auto& ref : refs) valid += ref.valid() ? 1 : 0;
  return valid;
}

Batch relabel(Batch batch) {
  batch.label += " (seen by pid " + std::to_string(::getpid()) + ")";
  return batch;
}

class Keeper {
 public:
  static Keeper* Create() { return new Keeper(); }
  static Keeper* Holding(std::vector<BlockRef> refs) {
    auto* keeper = new Keeper();
    keeper->kept_ = std::move(refs);
    return keeper;
  }
  bool Keep(std::vector<BlockRef> refs) {
    kept_ = std::move(refs);
    return true;
  }
  std::uint64_t Sum() {
    std::uint64_t sum = 0;
    for (const auto& block : sray::Get(kept_)) sum += SumOf(block);
    return sum;
  }
  bool Forget() {
    kept_.clear();
    return true;
  }
  // A block put by this actor's process, which owns it.
  BlockRef PutBlock(std::uint64_t seed) { return sray::Put(MakeBlock(seed)); }
  // Submits make_blocks_later for one block, and keeps the result's ref
  // without waiting for it.
  bool StartMaking(std::uint64_t seed, std::int64_t sleep_milliseconds, std::string made) {
    making_.push_back(sray::Task(make_blocks_later).Remote(seed, 1, sleep_milliseconds, made));
    return true;
  }
  std::int64_t Pid() { return ::getpid(); }

 private:
  std::vector<BlockRef> kept_;
  std::vector<sray::ObjectRef<std::vector<BlockRef>>> making_;
};

SRAY_REMOTE(sum_blocks, make_blocks, make_blocks_later, pass_on, block_sum, sum_through_ref,
            count_valid, relabel);
SRAY_REMOTE(Keeper::Create, Keeper::Holding, &Keeper::Keep, &Keeper::Sum, &Keeper::Forget,
            &Keeper::PutBlock, &Keeper::StartMaking, &Keeper::Pid);

std::uint64_t InStores() {
  std::uint64_t total = 0;
  for (const auto& node : sray::StoreUsage()) total += node.in_memory + node.spilled;
  return total;
}

// Releases travel as messages: gives them up to 10 s.
void ExpectStoresReturnTo(std::uint64_t before, const std::string& when) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (InStores() != before && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  Expect(InStores() == before, "store usage returns to " + std::to_string(before) + " bytes once " +
                                   when + " (" + std::to_string(InStores()) + " now)");
}

void Values() {
  const std::uint64_t before = InStores();
  {
    std::vector<BlockRef> driver_blocks;
    for (std::uint64_t seed = 0; seed < 4; ++seed)
      driver_blocks.push_back(sray::Put(MakeBlock(seed)));
    const std::uint64_t driver_sum = ExpectedSum(0, 4);
    Expect(sray::Get(sray::Task(sum_blocks).Remote(driver_blocks, 0)) == driver_sum,
           "a vector of ObjectRefs reaches a task as references, and the task Gets them");

    // The driver's only references go at once; the task borrows them.
    auto late = sray::Task(sum_blocks).Remote(driver_blocks, 1500);
    driver_blocks.clear();
    Expect(sray::Get(late) == driver_sum,
           "objects stay alive while a task that received them borrows them, though the "
           "driver dropped its references");

    const std::vector<BlockRef> worker_blocks =
        sray::Get(sray::Task(make_blocks).Remote(std::uint64_t{10}, std::uint64_t{3}));
    std::uint64_t got = 0;
    for (const auto& block : sray::Get(worker_blocks)) got += SumOf(block);
    Expect(worker_blocks.size() == 3 && got == ExpectedSum(10, 3),
           "a task returns ObjectRefs to objects it Put; the driver Gets them from their owner");

    Expect(sray::Get(sray::Task(pass_on).Remote(worker_blocks)) == ExpectedSum(10, 3),
           "borrowed references passed on in a vector to a further task");
    Expect(sray::Get(sray::Task(block_sum).Remote(worker_blocks[1])) == ExpectedSum(11, 1),
           "a borrowed reference as a task argument resolves through its owner");
    Expect(sray::Get(sray::Task(sum_through_ref).Remote(worker_blocks[2])) == ExpectedSum(12, 1),
           "an ObjectRef parameter receives the reference, not the value");

    const Batch batch{
        .label = "batch", .blocks = worker_blocks, .extra = sray::Put<std::int64_t>(7)};
    const Batch back = sray::Get(sray::Task(relabel).Remote(batch));
    Expect(back.blocks.size() == 3 && back.blocks[0].id() == worker_blocks[0].id() &&
               sray::Get(back.extra) == 7 && back.label.rfind("batch (seen by pid ", 0) == 0,
           "a struct holding ObjectRefs goes to a task and comes back with the same references");

    const std::vector<BlockRef> with_empty{worker_blocks[0], BlockRef()};
    Expect(sray::Get(sray::Task(count_valid).Remote(with_empty)) == 1,
           "an empty ObjectRef inside a vector arrives empty");

    auto keeper = sray::Actor(Keeper::Create).Remote();
    {
      std::vector<BlockRef> kept;
      for (std::uint64_t seed = 20; seed < 22; ++seed) kept.push_back(sray::Put(MakeBlock(seed)));
      (void)sray::Get(keeper.Task(&Keeper::Keep).Remote(kept));
    }
    Expect(sray::Get(keeper.Task(&Keeper::Sum).Remote()) == ExpectedSum(20, 2),
           "an actor keeps ObjectRefs in its state after the driver dropped its own");

    sray::ActorHandle<Keeper> holder = [] {
      std::vector<BlockRef> given;
      for (std::uint64_t seed = 40; seed < 42; ++seed) given.push_back(sray::Put(MakeBlock(seed)));
      return sray::Actor(Keeper::Holding).Remote(given);
    }();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    Expect(sray::Get(holder.Task(&Keeper::Sum).Remote()) == ExpectedSum(40, 2),
           "references in an actor's constructor arguments stay alive for the actor");
    // Its borrowed references go back before it dies (a killed borrower's
    // registrations are not yet given back: docs/ARCHITECTURE.md, gaps).
    (void)sray::Get(holder.Task(&Keeper::Forget).Remote());
    holder.Kill();

    // A Put value holding references keeps them alive by itself.
    sray::ObjectRef<std::vector<BlockRef>> outer;
    {
      std::vector<BlockRef> inner;
      for (std::uint64_t seed = 30; seed < 32; ++seed) inner.push_back(sray::Put(MakeBlock(seed)));
      outer = sray::Put(inner);
    }
    Expect(sray::Get(sray::Task(sum_blocks).Remote(outer, 0)) == ExpectedSum(30, 2),
           "a Put value holding ObjectRefs keeps the objects alive and passes them on");
    (void)sray::Get(keeper.Task(&Keeper::Forget).Remote());
    Expect(InStores() > before, "the objects are in the stores while referenced");
  }
  // Every reference is gone: the driver's, the workers', the actor's.
  ExpectStoresReturnTo(before, "no process holds a reference");
}

// Kills the process of `keeper`, a borrower, as a crash would.
void KillProcessOf(const sray::ActorHandle<Keeper>& keeper) {
  const auto pid = static_cast<pid_t>(sray::Get(keeper.Task(&Keeper::Pid).Remote()));
  ::kill(pid, SIGKILL);
}

// A borrower that dies never gives its registrations back: its owner drops
// them when its node manager passes the process's end on, and frees what
// only the dead borrower held (it kept it to the end of the job before).
void DeadBorrower() {
  const std::uint64_t before = InStores();
  {
    // The driver owns the block; an actor borrows it and dies.
    auto keeper = sray::Actor(Keeper::Create).Remote();
    (void)sray::Get(
        keeper.Task(&Keeper::Keep).Remote(std::vector<BlockRef>{sray::Put(MakeBlock(70))}));
    Expect(InStores() > before, "a block the driver put is in a store while an actor keeps it");
    KillProcessOf(keeper);
  }
  ExpectStoresReturnTo(before, "the actor that borrowed the driver's block died");
  {
    // An actor's process owns the block; another actor borrows it and dies.
    auto maker = sray::Actor(Keeper::Create).Remote();
    auto keeper = sray::Actor(Keeper::Create).Remote();
    (void)sray::Get(
        keeper.Task(&Keeper::Keep)
            .Remote(std::vector<BlockRef>{sray::Get(maker.Task(&Keeper::PutBlock).Remote(71))}));
    Expect(InStores() > before, "a block an actor put is in a store while another keeps it");
    KillProcessOf(keeper);
    ExpectStoresReturnTo(before, "the actor that borrowed another actor's block died");
    Expect(sray::Get(maker.Task(&Keeper::Forget).Remote()), "the owner goes on");
  }
  {
    // An actor submits a task and dies while it runs; the task then puts a
    // block and returns its ref, lent to the dead submitter after the news
    // of its end reached the task's worker (the block stayed before).
    const std::filesystem::path made = std::filesystem::temp_directory_path() /
                                       ("sray-refs-check-made-" + std::to_string(::getpid()));
    auto submitter = sray::Actor(Keeper::Create).Remote();
    Expect(sray::Get(submitter.Task(&Keeper::StartMaking).Remote(72, 1000, made.string())),
           "an actor starts a task that puts a block later");
    KillProcessOf(submitter);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!std::filesystem::exists(made) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const bool was_made = std::filesystem::remove(made);
    Expect(was_made, "the task of the dead actor put its block");
    ExpectStoresReturnTo(before, "a task whose submitter died returned a block's ref");
  }
}

}  // namespace

// Workers of this job's node managers under `sray run` (grandchildren of
// the launcher, this process's parent), from /proc.
std::size_t WorkersOfTheJob() {
  std::map<pid_t, pid_t> parents;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // pid (comm) state ppid ...: comm may hold spaces, so after the last ')'.
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    char state = 0;
    pid_t parent = 0;
    // Zombies have ended: not counted, nor seen as parents.
    if (rest >> state >> parent && state != 'Z') parents[std::stoi(name)] = parent;
  }
  const pid_t launcher = ::getppid();
  std::size_t workers = 0;
  for (const auto& [pid, parent] : parents) {
    const auto grandparent = parents.find(parent);
    if (parent != launcher && grandparent != parents.end() && grandparent->second == launcher)
      ++workers;
  }
  return workers;
}

// Waits up to `limit` for the job to have fewer than `workers` workers;
// returns how many it has then.
std::size_t WaitForFewerWorkers(std::size_t workers, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::size_t now = WorkersOfTheJob();
  while (now >= workers && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    now = WorkersOfTheJob();
  }
  return now;
}

// A worker that owns objects others still hold stays when its node ends
// surplus idle workers (those above max_workers: here the workers of killed
// actors, back in the pool), and ends once it owns none. Ending it earlier
// lost the objects.
void IdleOwners() {
  // Actors spread evenly over the 3 nodes: two more per node than a node's
  // pool size, max(4, 2 x its CPUs) (core/init.cc).
  const char* cpus_variable = std::getenv("SRAY_NODE_CPUS");
  const std::uint64_t cpus = cpus_variable != nullptr ? std::stoull(cpus_variable) : 1;
  const std::uint64_t actors = 3 * (std::max<std::uint64_t>(4, 2 * cpus) + 2);
  const std::size_t before = WorkersOfTheJob();
  std::vector<sray::ActorHandle<Keeper>> keepers;
  for (std::uint64_t i = 0; i < actors; ++i)
    keepers.push_back(sray::Actor(Keeper::Create).Remote());
  std::vector<sray::ObjectRef<BlockRef>> made;
  for (std::uint64_t seed = 0; seed < actors; ++seed) {
    made.push_back(keepers[seed].Task(&Keeper::PutBlock).Remote(seed));
  }
  std::vector<BlockRef> blocks = sray::Get(made);
  made.clear();
  const std::size_t with_actors = WorkersOfTheJob();
  Expect(with_actors >= before + actors, "each actor has a worker of its own");
  // Their workers go back to the pools of their nodes, above max_workers,
  // each still owning its block: asked to end, they stay.
  for (auto& keeper : keepers) keeper.Kill();
  keepers.clear();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  std::uint64_t sum = 0;
  for (const auto& block : sray::Get(blocks)) sum += SumOf(block);
  Expect(sum == ExpectedSum(0, actors),
         "blocks owned by surplus idle workers are read seconds later");
  const std::size_t kept = WorkersOfTheJob();
  Expect(kept >= before + actors,
         "workers owning objects stay above the pool size (" + std::to_string(kept) + " workers)");

  blocks.clear();
  const std::size_t now = WaitForFewerWorkers(kept, std::chrono::seconds(10));
  Expect(now < kept, "surplus workers end once they own nothing (" + std::to_string(kept) +
                         " workers, then " + std::to_string(now) + ")");
}

int main(int argc, char** argv) {
  sray::Init(argc, argv);
  const std::string mode = argc > 1 ? argv[1] : "values";
  try {
    if (mode == "values") {
      Values();
    } else if (mode == "idle_owners") {
      IdleOwners();
    } else if (mode == "dead_borrower") {
      DeadBorrower();
    } else {
      Fail("unknown mode " + mode);
    }
  } catch (const std::exception& error) {
    Fail(std::string("unexpected exception: ") + error.what());
  }
  sray::Shutdown();
  return 0;
}
