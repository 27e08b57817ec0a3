// The seed's parallel data processing: a large array split into 100 chunks,
// each processed by a remote task on whichever node has a free CPU, the
// results gathered with Get.
//
//   sray run -N3 ./sray_example_parallel_data
//   srun -N3 --ray-cluster ./sray_example_parallel_data

#include <cmath>
#include <cstdint>
#include <iostream>
#include <numeric>
#include <vector>

#include <sray/api.h>

namespace {

struct ChunkSummary {
  std::uint32_t node = 0;
  double sum_of_squares = 0;
  MSGPACK_DEFINE(node, sum_of_squares)
};

ChunkSummary process_data(std::vector<double> chunk) {
  ChunkSummary summary;
  summary.node = sray::CurrentNode().node_id;
  for (const double value : chunk) summary.sum_of_squares += value * value;
  return summary;
}
SRAY_REMOTE(process_data);

}  // namespace

int main(int argc, char** argv) {
  sray::Init(argc, argv);

  constexpr std::size_t kChunks = 100;
  constexpr std::size_t kChunkSize = 100000;
  std::vector<double> data(kChunks * kChunkSize);
  std::iota(data.begin(), data.end(), 0.0);
  for (auto& value : data) value = std::sin(value);

  std::vector<sray::ObjectRef<ChunkSummary>> refs;
  for (std::size_t chunk = 0; chunk < kChunks; ++chunk) {
    std::vector<double> part(data.begin() + static_cast<std::ptrdiff_t>(chunk * kChunkSize),
                             data.begin() + static_cast<std::ptrdiff_t>((chunk + 1) * kChunkSize));
    // A chunk is 800 kB: Put stores it in the node's shared memory, and the
    // task reads it from there (or pulls it to its own node).
    refs.push_back(sray::Task(process_data).Remote(sray::Put(part)));
  }
  const auto summaries = sray::Get(refs);

  double total = 0;
  std::vector<int> chunks_per_node(sray::CurrentNode().num_nodes, 0);
  for (const auto& summary : summaries) {
    total += summary.sum_of_squares;
    if (summary.node < chunks_per_node.size()) chunks_per_node[summary.node]++;
  }
  double expected = 0;
  for (const double value : data) expected += value * value;

  std::cout << "sum of squares " << total << " (expected " << expected << ")\n";
  for (std::size_t node = 0; node < chunks_per_node.size(); ++node) {
    std::cout << "node " << node << " processed " << chunks_per_node[node] << " chunks\n";
  }
  const bool correct = std::abs(total - expected) <= 1e-6 * std::abs(expected);
  std::cout << (correct ? "result correct" : "RESULT WRONG") << "\n";
  sray::Shutdown();
  return correct ? 0 : 1;
}
