// A job that holds objects on every node while another user's job shares
// those nodes (tests/slurm/test_two_users_share_nodes.sh): the driver Puts a
// 2.25 MiB block (in the store, not inline), one Holder actor per node
// (a SPREAD placement group) reads it, so each node's store has a copy, and
// keeps it. The driver prints each holder's node and pid, "ready", then
// waits until the file named by its argument exists (at most 300 s). Before
// it ends every holder sums its copy again: the other job must not have
// touched them. With `spill` (and a small object_store_memory) the driver
// also Puts blocks until node 0 spills some to its session directory, and
// reads them all back at the end. Prints "ok: <what>" lines, or "FAIL: ..."
// and exits 1.
//
//   shared_node_check DONE_FILE [spill]

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <map>
#include <numeric>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <sray/api.h>

#include "check.h"

namespace {

using Block = std::vector<std::uint64_t>;
using BlockRef = sray::ObjectRef<Block>;
// 256 Ki words above 2^32 (9 bytes each in msgpack): 2.25 MiB, in the store.
constexpr std::uint64_t kWords = 256 * 1024;

Block MakeBlock() {
  Block block(kWords);
  for (std::uint64_t index = 0; index < kWords; ++index) block[index] = (std::uint64_t{1} << 40) + index * 7919;
  return block;
}

std::uint64_t SumOf(const Block& block) { return std::accumulate(block.begin(), block.end(), std::uint64_t{0}); }

// Holds a borrowed block on its node: its Get leaves a copy in that node's store.
class Holder {
 public:
  static Holder* Create(BlockRef block) { return new Holder(std::move(block)); }
  std::uint64_t Sum() const { return SumOf(sray::Get(block_)); }
  std::int64_t Pid() const { return ::getpid(); }
  std::int64_t Node() const { return sray::CurrentNode().node_id; }

 private:
  explicit Holder(BlockRef block) : block_(std::move(block)) {}
  BlockRef block_;
};

SRAY_REMOTE(Holder::Create, &Holder::Sum, &Holder::Pid, &Holder::Node);

}  // namespace

int main(int argc, char** argv) {
  sray::Init(argc, argv);
  if (argc < 2) sray::check::Fail("usage: shared_node_check DONE_FILE");
  const std::uint64_t expected = SumOf(MakeBlock());
  const BlockRef block = sray::Put(MakeBlock());
  const std::int64_t nodes = static_cast<std::int64_t>(sray::CurrentNode().num_nodes);
  std::vector<std::map<std::string, double>> bundles(static_cast<std::size_t>(nodes), {{"CPU", 1}});
  auto group = sray::CreatePlacementGroup(
      {.name = "holders", .bundles = bundles, .strategy = sray::PlacementStrategy::kSpread});
  sray::check::Expect(group.Wait(std::chrono::seconds(60)), "one bundle per node is placed");
  std::vector<sray::ActorHandle<Holder>> holders;
  for (std::int64_t index = 0; index < nodes; ++index) {
    holders.push_back(
        sray::Actor(Holder::Create).SetPlacementGroup(group, static_cast<int>(index)).Remote(block));
  }
  std::vector<bool> seen(static_cast<std::size_t>(nodes), false);
  for (auto& holder : holders) {
    sray::check::Expect(sray::Get(holder.Task(&Holder::Sum).Remote()) == expected, "a holder read the block");
    const auto node = sray::Get(holder.Task(&Holder::Node).Remote());
    seen.at(static_cast<std::size_t>(node)) = true;
    std::cout << "holder node " << node << " pid " << sray::Get(holder.Task(&Holder::Pid).Remote()) << std::endl;
  }
  sray::check::Expect(std::find(seen.begin(), seen.end(), false) == seen.end(), "a holder on every node");
  const bool spill = argc > 2 && std::string(argv[2]) == "spill";
  std::vector<BlockRef> spilled_blocks;
  if (spill) {
    auto spilled_on_node0 = [] {
      for (const auto& usage : sray::StoreUsage())
        if (usage.node_id == 0) return usage.spilled;
      return std::uint64_t{0};
    };
    while (spilled_on_node0() == 0 && spilled_blocks.size() < 64)
      spilled_blocks.push_back(sray::Put(MakeBlock()));
    sray::check::Expect(spilled_on_node0() > 0, "node 0 spilled blocks to its session directory (" +
                                                    std::to_string(spilled_blocks.size()) +
                                                    " Put)");
  }
  std::cout << "ready" << std::endl;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  while (!std::filesystem::exists(argv[1]) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (auto& holder : holders) {
    sray::check::Expect(sray::Get(holder.Task(&Holder::Sum).Remote()) == expected,
                        "a holder's copy is intact at the end");
  }
  sray::check::Expect(SumOf(sray::Get(block)) == expected, "the driver's block is intact at the end");
  if (spill) {
    bool intact = true;
    for (const auto& spilled : spilled_blocks)
      intact = intact && SumOf(sray::Get(spilled)) == expected;
    sray::check::Expect(intact, "the spilled blocks read back intact at the end");
  }
  sray::Shutdown();
  return 0;
}
