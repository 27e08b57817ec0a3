#include "wire/job_values.h"

namespace sray::wire {
namespace {

class PmixValues final : public JobValues {
 public:
  explicit PmixValues(PmixClient& pmix) : pmix_(pmix) {}
  Result<std::vector<std::byte>> Get(std::uint32_t rank, const std::string& key) override {
    return pmix_.Get(rank, key, false);
  }

 private:
  PmixClient& pmix_;
};

class TableValues final : public JobValues {
 public:
  explicit TableValues(std::vector<rendezvous::Values> values) : values_(std::move(values)) {}
  Result<std::vector<std::byte>> Get(std::uint32_t rank, const std::string& key) override {
    if (rank >= values_.size()) {
      return Status::NotFound("rank " + std::to_string(rank) + " is not one of the step's " +
                              std::to_string(values_.size()) + " launched ranks");
    }
    const auto found = values_[rank].find(key);
    if (found == values_[rank].end()) {
      return Status::NotFound("rank " + std::to_string(rank) + " published no '" + key + "'");
    }
    return found->second;
  }

 private:
  // Immutable after construction, so readers need no lock.
  const std::vector<rendezvous::Values> values_;
};

}  // namespace

std::unique_ptr<JobValues> ValuesFromPmix(PmixClient& pmix) {
  return std::make_unique<PmixValues>(pmix);
}

std::unique_ptr<JobValues> ValuesFromTable(std::vector<rendezvous::Values> values_by_rank) {
  return std::make_unique<TableValues>(std::move(values_by_rank));
}

}  // namespace sray::wire
