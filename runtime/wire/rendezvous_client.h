#pragma once

// A launched rank's side of wire-up through srun (wire/rendezvous_server.h):
// one TCP connection to srun, this rank's values out, every rank's back.
//
// Thread-safety: a blocking function with no shared state.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "wire/rendezvous_codec.h"

namespace sray::wire::rendezvous {

struct ExchangeRequest {
  std::string host;  // srun's host (SLURM_SRUN_COMM_HOST)
  Invitation invitation;
  std::uint32_t rank = 0;
  std::uint32_t size = 0;
  Bytes values;  // EncodeValues of this rank's values
  std::chrono::milliseconds timeout{120'000};
  // How long reaching srun may take before it counts as unreachable.
  std::chrono::milliseconds connect_timeout{15'000};
};

// Every rank's values in rank order, once all of the step's ranks have
// contributed. Fails, saying which, when srun cannot be reached, refuses,
// or has no answer within the timeout.
Result<std::vector<Bytes>> ExchangeThroughSrun(const ExchangeRequest& request);

}  // namespace sray::wire::rendezvous
