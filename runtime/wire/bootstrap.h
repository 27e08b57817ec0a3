#pragma once

// Wires up the processes of a job: each process connects to PMIx, learns its
// place in the job, creates its UCX worker and publishes the worker's
// address (the full address for processes on its node, the network-only
// address for the rest), its location and, on rank 0, the job secret. Then
// one exchange makes every rank's values available to every rank, and the
// transport makes endpoints from them lazily.
//
// The exchange: under srun, through srun's rendezvous
// (wire/rendezvous_server.h), which the SPANK plugin starts unless
// wireup=pmix; otherwise (`sray run`, wireup=pmix) a PMIx fence with data
// collection. Slurm 22.05's PMIx plugin can leave that fence hanging for good
// (ARCHITECTURE, "Wire-up through srun"); srun's rendezvous involves no step
// daemon.
//
// Why one collective exchange rather than direct modex: a job that talks
// all-to-all (the head and the node managers do) would otherwise pay one
// server round trip per peer on first contact; the collective costs one
// exchange and keeps first calls fast. Direct modex would scale better for
// sparse patterns at thousands of ranks; see docs/ARCHITECTURE.md.
//
// Ownership: WiredJob owns all three; the transport is destroyed first
// because its address resolver reads the job's values, which may read
// through the PMIx client.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "transport/address_book.h"
#include "transport/transport.h"
#include "wire/job_values.h"
#include "wire/pmix_client.h"

namespace sray::wire {

inline constexpr const char* kFullAddressKey = "sray.ucx.address.full";
inline constexpr const char* kNetworkAddressKey = "sray.ucx.address.network";
inline constexpr const char* kJobSecretKey = "sray.job.secret";
// "<node id> <pid> <start time> <hostname>": Slurm's PMIx answers PMIX_NODEID
// and PMIX_HOSTNAME only for a process itself, so each process publishes its
// own location.
inline constexpr const char* kLocationKey = "sray.location";

struct PeerLocation {
  std::uint32_t node_id = 0;
  std::string hostname;
  // Identify the process on its node (the start time guards against reuse
  // of the pid), so peers on the same node can tell whether it still runs.
  std::int64_t pid = 0;
  std::uint64_t start_time = 0;
  // The kernel's boot id: processes with the same one run on one machine and
  // share its /dev/shm, whatever node names the launcher gave them (emulated
  // nodes have their own).
  std::string machine;
};

struct WiredJob {
  std::unique_ptr<PmixClient> pmix;
  // What every launched rank published; may read through `pmix`, so it is
  // declared after it (and destroyed before it).
  std::unique_ptr<JobValues> values;
  std::unique_ptr<transport::Transport> transport;
  // The job secret every frame proves; processes the job starts itself
  // (workers) receive it from their parent.
  transport::JobToken secret{};

  // "rank 3 (node 1, n2)", for messages.
  [[nodiscard]] std::string Describe(std::uint32_t rank) const;
  Result<PeerLocation> LocationOf(std::uint32_t rank) const;
};

struct WireUpOptions {
  std::string keepalive_interval = "1s";
  // Peers outside PMIx (workers this process starts); may be null.
  std::shared_ptr<transport::AddressBook> address_book;
  // More job-wide keys to publish before the fence (e.g. the node's
  // environment lock), readable by every rank afterwards.
  std::vector<std::pair<std::string, transport::Bytes>> publish;
};

Result<std::unique_ptr<WiredJob>> WireUp(const WireUpOptions& options = {});

}  // namespace sray::wire
