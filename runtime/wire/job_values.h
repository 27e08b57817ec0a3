#pragma once

// What every launched rank of the job published at wire-up (its addresses,
// its location, the job secret, the node's environment lock), readable once
// wire-up is done. Published either through PMIx (put, commit, fence) or
// through srun's rendezvous (wire/rendezvous_server.h); this hides which.
//
// Thread-safety: Get may be called from any thread.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "wire/pmix_client.h"
#include "wire/rendezvous_codec.h"

namespace sray::wire {

class JobValues {
 public:
  virtual ~JobValues() = default;
  // What launched rank `rank` published under `key`.
  virtual Result<std::vector<std::byte>> Get(std::uint32_t rank, const std::string& key) = 0;
};

// Reads through PMIx_Get after the fence; `pmix` must outlive the result.
std::unique_ptr<JobValues> ValuesFromPmix(PmixClient& pmix);
// Reads from what srun's rendezvous answered: every rank's values, in rank
// order.
std::unique_ptr<JobValues> ValuesFromTable(std::vector<rendezvous::Values> values_by_rank);

}  // namespace sray::wire
