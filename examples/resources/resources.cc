// The resource example: a task that needs 2 CPUs and tasks that need half a
// GPU each. It runs on a machine without GPUs by declaring them in config:
//
//   sray run -N2 --cpus-per-node 2 --ray-cluster=resources=GPU:1 ./resources
//   srun -N2 -c2 --ray-cluster=config=$PWD/gpus.toml ./resources
//     (gpus.toml: resources = "GPU:1")
//
// Two half-GPU tasks share one device (the same CUDA_VISIBLE_DEVICES), and a
// task asking more than any node has fails at once naming the request.

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <sray/api.h>

namespace {

struct Placement {
  std::uint32_t node = 0;
  std::string devices;
  std::uint64_t checksum = 0;
  MSGPACK_DEFINE(node, devices, checksum)
};

Placement WhereAmI(std::uint64_t checksum) {
  const char* devices = std::getenv("CUDA_VISIBLE_DEVICES");
  return {sray::CurrentNode().node_id, devices == nullptr ? "none" : devices, checksum};
}

// Pretends to train on a shard with two threads (it holds 2 CPUs).
Placement train_shard(std::uint64_t shard) {
  std::uint64_t sums[2] = {0, 0};
  std::thread helper([&] {
    for (std::uint64_t i = 0; i < 2000000; ++i) sums[1] += (i * shard) % 7;
  });
  for (std::uint64_t i = 0; i < 2000000; ++i) sums[0] += (i + shard) % 5;
  helper.join();
  return WhereAmI(sums[0] + sums[1]);
}

// Pretends to run inference on half a GPU for a moment, so two overlap.
Placement infer(std::uint64_t batch) {
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  return WhereAmI(batch * 31);
}

SRAY_REMOTE(train_shard, infer);

}  // namespace

int main(int argc, char** argv) {
  sray::Init(argc, argv);

  auto trained = sray::Get(sray::Task(train_shard).SetResources({{"CPU", 2}}).Remote(7));
  std::cout << "train_shard (CPU: 2) ran on node " << trained.node << "\n";

  std::vector<sray::ObjectRef<Placement>> batches;
  for (std::uint64_t batch = 0; batch < 4; ++batch) {
    batches.push_back(sray::Task(infer).SetResources({{"CPU", 0.5}, {"GPU", 0.5}}).Remote(batch));
  }
  std::map<std::string, int> tasks_per_device;
  for (const auto& placement : sray::Get(batches)) {
    std::cout << "infer (GPU: 0.5) ran on node " << placement.node
              << " with CUDA_VISIBLE_DEVICES=" << placement.devices << "\n";
    tasks_per_device["node " + std::to_string(placement.node) + " device " + placement.devices]++;
  }
  bool shared = false;
  for (const auto& [device, count] : tasks_per_device) shared = shared || count >= 2;
  std::cout << (shared ? "half-GPU tasks shared a device" : "no device was shared") << "\n";

  try {
    (void)sray::Get(sray::Task(infer).SetResources({{"GPU", 64}}).Remote(0));
    std::cout << "RESULT WRONG: 64 GPUs were granted\n";
    return 1;
  } catch (const sray::InfeasibleResourcesError& error) {
    std::cout << "asking 64 GPUs fails at once: " << error.what() << "\n";
  }
  sray::Shutdown();
  return 0;
}
