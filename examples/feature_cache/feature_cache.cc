// The seed's FeatureCache actor: one process holds a cache of expensive
// features; Get(key) computes a feature on a miss, keeps it, and answers
// later calls from the cache. Tasks on every node reach it through its name.
//
//   sray run -N3 ./feature_cache
//   srun -N3 --ray-cluster ./feature_cache

#include <cmath>
#include <cstdint>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <sray/api.h>

namespace {

struct Feature {
  std::string key;
  std::vector<double> values;
  bool hit = false;  // answered from the cache
  MSGPACK_DEFINE(key, values, hit)
};

class FeatureCache {
 public:
  static FeatureCache* Create(std::uint32_t dimensions) { return new FeatureCache(dimensions); }

  Feature Get(std::string key) {
    auto found = cache_.find(key);
    if (found != cache_.end()) {
      ++hits_;
      return Feature{key, found->second, true};
    }
    ++misses_;
    std::vector<double> values = Compute(key);
    cache_.emplace(key, values);
    return Feature{key, std::move(values), false};
  }

  std::vector<std::uint64_t> Stats() const { return {hits_, misses_, cache_.size()}; }

 private:
  explicit FeatureCache(std::uint32_t dimensions) : dimensions_(dimensions) {}

  // Stands in for an expensive feature extractor: deterministic per key.
  std::vector<double> Compute(const std::string& key) const {
    std::uint64_t seed = 1469598103934665603ULL;
    for (const char character : key) seed = (seed ^ static_cast<unsigned char>(character)) * 1099511628211ULL;
    std::vector<double> values(dimensions_);
    for (std::uint32_t index = 0; index < dimensions_; ++index) {
      values[index] = std::sin(static_cast<double>(seed % 10007) + index);
    }
    return values;
  }

  std::uint32_t dimensions_;
  std::map<std::string, std::vector<double>> cache_;
  std::uint64_t hits_ = 0;
  std::uint64_t misses_ = 0;
};

struct BatchResult {
  std::uint32_t node = 0;
  std::uint32_t hits = 0;
  double checksum = 0;
  MSGPACK_DEFINE(node, hits, checksum)
};

// A task: looks up a batch of keys through the named cache.
BatchResult featurize(std::vector<std::string> keys) {
  auto cache = sray::GetActor<FeatureCache>("feature_cache");
  if (!cache) throw std::runtime_error("the feature_cache actor is gone");
  std::vector<sray::ObjectRef<Feature>> lookups;
  for (const auto& key : keys) lookups.push_back(cache->Task(&FeatureCache::Get).Remote(key));
  BatchResult result;
  result.node = sray::CurrentNode().node_id;
  for (const auto& feature : sray::Get(lookups)) {
    result.hits += feature.hit ? 1 : 0;
    for (const double value : feature.values) result.checksum += value;
  }
  return result;
}

}  // namespace

SRAY_REMOTE(FeatureCache::Create, &FeatureCache::Get, &FeatureCache::Stats);
SRAY_REMOTE(featurize);

int main(int argc, char** argv) {
  sray::Init(argc, argv);
  auto cache = sray::Actor(FeatureCache::Create).SetName("feature_cache").Remote(64U);

  // 30 batches of 20 keys drawn from 100 distinct keys: every key misses
  // once, and all later lookups hit.
  constexpr int kBatches = 30;
  std::vector<sray::ObjectRef<BatchResult>> batches;
  for (int batch = 0; batch < kBatches; ++batch) {
    std::vector<std::string> keys;
    for (int index = 0; index < 20; ++index) keys.push_back("user-" + std::to_string((batch * 7 + index * 13) % 100));
    batches.push_back(sray::Task(featurize).Remote(keys));
  }
  std::set<std::uint32_t> nodes;
  std::uint64_t hits = 0;
  for (const auto& result : sray::Get(batches)) {
    nodes.insert(result.node);
    hits += result.hits;
  }
  const auto stats = sray::Get(cache.Task(&FeatureCache::Stats).Remote());
  std::cout << "lookups " << kBatches * 20 << ", hits " << stats[0] << ", misses " << stats[1]
            << ", cached keys " << stats[2] << ", tasks on " << nodes.size() << " nodes\n";
  const bool correct = stats[0] + stats[1] == kBatches * 20 && stats[1] == stats[2] &&
                       stats[2] <= 100 && hits == stats[0];
  std::cout << (correct ? "cache correct" : "cache WRONG") << "\n";
  sray::Shutdown();
  return correct ? 0 : 1;
}
