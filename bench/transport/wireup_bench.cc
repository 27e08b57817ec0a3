// Wire-up cost: a collecting fence versus PMIx direct modex, for the choice
// described in runtime/wire/bootstrap.h. Every rank publishes a UCX-sized
// address, then obtains every other rank's, either after one fence with data
// collection or by asking for each key directly (no fence). Rank 0 prints
//   metric wireup_<mode>_ms <slowest rank's milliseconds> ms
// Run: srun -N3 --ntasks-per-node=2 --ray-cluster wireup_bench fence|direct

#include <chrono>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "wire/pmix_client.h"

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "fence" && mode != "direct") {
    std::cerr << "usage: wireup_bench fence|direct\n";
    return 2;
  }
  auto client = sray::wire::PmixClient::Connect();
  if (!client.ok()) {
    std::cerr << "sray: " << client.status().message() << "\n";
    return 2;
  }
  auto& pmix = **client;
  const auto& layout = pmix.layout();
  std::vector<std::byte> address(200, std::byte(layout.rank));  // about a UCX worker address
  const std::string key = "bench.address." + mode;

  // Everyone starts the clock together.
  if (!pmix.Fence().ok()) return 2;
  const auto started = std::chrono::steady_clock::now();
  if (!pmix.Put(sray::wire::Scope::kGlobal, key, address).ok() || !pmix.Commit().ok()) return 2;
  if (mode == "fence" && !pmix.Fence().ok()) return 2;
  for (std::uint32_t peer = 0; peer < layout.size; ++peer) {
    auto value = pmix.Get(peer, key, false);
    if (!value.ok() || value->size() != address.size() || (*value)[0] != std::byte(peer)) {
      std::cerr << "rank " << layout.rank << ": cannot get rank " << peer << "'s address: "
                << (value.ok() ? "wrong value" : value.status().message()) << "\n";
      return 1;
    }
  }
  const double milliseconds =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();

  // Gather the slowest rank's time at rank 0.
  std::vector<std::byte> mine(sizeof(double));
  std::memcpy(mine.data(), &milliseconds, sizeof(double));
  if (!pmix.Put(sray::wire::Scope::kGlobal, key + ".ms", mine).ok() || !pmix.Commit().ok() ||
      !pmix.Fence().ok()) {
    return 2;
  }
  if (layout.rank == 0) {
    double slowest = 0;
    for (std::uint32_t peer = 0; peer < layout.size; ++peer) {
      auto value = pmix.Get(peer, key + ".ms", false);
      if (!value.ok()) return 2;
      double theirs = 0;
      std::memcpy(&theirs, value->data(), sizeof(double));
      slowest = std::max(slowest, theirs);
    }
    std::cout << "metric wireup_" << mode << "_ms " << slowest << " ms (" << layout.size
              << " ranks)" << std::endl;
  }
  return 0;
}
