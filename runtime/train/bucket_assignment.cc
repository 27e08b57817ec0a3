#include "train/bucket_assignment.h"

#include <map>

namespace sray::train::internal {

std::vector<std::vector<std::size_t>> AssignBuckets(const std::vector<BucketParameter>& parameters,
                                                    std::size_t first_bucket_bytes,
                                                    std::size_t bucket_bytes) {
  struct Open {
    std::vector<std::size_t> indices;
    std::size_t bytes = 0;
  };
  std::vector<std::vector<std::size_t>> buckets;
  std::map<int, Open> open;  // per kind
  std::vector<int> kinds_seen;
  for (std::size_t position = parameters.size(); position > 0; --position) {
    const std::size_t index = position - 1;
    const BucketParameter& parameter = parameters[index];
    auto [entry, inserted] = open.try_emplace(parameter.kind);
    if (inserted) kinds_seen.push_back(parameter.kind);
    Open& bucket = entry->second;
    bucket.indices.push_back(index);
    bucket.bytes += parameter.bytes;
    const std::size_t cap = buckets.empty() ? first_bucket_bytes : bucket_bytes;
    if (bucket.bytes >= cap) {
      buckets.push_back(std::move(bucket.indices));
      bucket = Open{};
    }
  }
  for (int kind : kinds_seen) {
    if (!open[kind].indices.empty()) buckets.push_back(std::move(open[kind].indices));
  }
  return buckets;
}

}  // namespace sray::train::internal
