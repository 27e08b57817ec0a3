#include "wire/bootstrap.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <limits>
#include <optional>
#include <sstream>
#include <string_view>
#include <system_error>

#include "common/log.h"
#include "common/process_stat.h"
#include "common/random_bytes.h"
#include "wire/rendezvous_client.h"
#include "wire/rendezvous_invitation.h"

namespace sray::wire {
namespace {

// Where a rank's wire-up spends its time, for a debug line (bench/launch
// reads it to break a step's start down).
class PhaseTimes {
 public:
  void Mark(const char* phase) {
    const auto now = std::chrono::steady_clock::now();
    text_ +=
        (text_.empty() ? "" : ", ") + std::string(phase) + " " + DescribeMilliseconds(now - last_);
    last_ = now;
  }
  [[nodiscard]] const std::string& text() const { return text_; }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
  std::string text_;
};

Result<transport::JobToken> NewJobSecret() {
  transport::JobToken secret{};
  const Status filled = FillRandom(secret, "the job secret");
  if (!filled.ok()) return filled;
  return secret;
}

Result<PeerLocation> LocationWith(JobValues& values, std::uint32_t launched, std::uint32_t rank) {
  // Ranks above the job's are workers the node managers started: asking
  // PMIx about one would block until its lookup times out.
  if (rank >= launched) {
    return Status::NotFound("rank " + std::to_string(rank) +
                            " is not a launched process of the job (a worker that has ended?)");
  }
  auto bytes = values.Get(rank, kLocationKey);
  if (!bytes.ok()) return bytes.status();
  std::istringstream text{std::string(transport::TextOf(*bytes))};
  PeerLocation location;
  text >> location.node_id >> location.pid >> location.start_time >> location.machine;
  std::getline(text >> std::ws, location.hostname);
  if (!text && !text.eof()) {
    return Status::Internal("malformed location published by rank " + std::to_string(rank));
  }
  return location;
}

// This machine's boot id (one word); where it cannot be read, the host's
// name (a shared word such as "unknown" would make every node of a job count
// as one machine and shrink each store to a fraction of its share).
std::string MachineId(const std::string& hostname) {
  std::ifstream file("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!(file >> id) || id.empty()) return "host:" + hostname;
  return id;
}

std::string DescribeWith(JobValues& values, std::uint32_t launched, std::uint32_t rank) {
  std::string text = "rank " + std::to_string(rank);
  auto location = LocationWith(values, launched, rank);
  if (location.ok())
    text += " (node " + std::to_string(location->node_id) + ", " + location->hostname + ")";
  return text;
}

// srun's host as Slurm gives it to the step's tasks.
std::string SrunHost() {
  for (const char* name : {"SLURM_SRUN_COMM_HOST", "SLURM_LAUNCH_NODE_IPADDR"}) {
    if (const char* host = std::getenv(name); host != nullptr && *host != '\0') return host;
  }
  return {};
}

// Every launched rank's values through srun's rendezvous, in rank order.
Result<std::unique_ptr<JobValues>> ValuesThroughSrun(const rendezvous::Invitation& invitation,
                                                     const JobLayout& layout,
                                                     const rendezvous::Values& own) {
  const std::string host = SrunHost();
  if (host.empty()) {
    return Status::Unavailable(
        "srun's host is not known (neither SLURM_SRUN_COMM_HOST nor SLURM_LAUNCH_NODE_IPADDR is "
        "set): "
        "run with --ray-cluster=wireup=pmix");
  }
  if (Status fits = rendezvous::ValuesFit(own); !fits.ok()) {
    return Status::InvalidArgument(fits.message() +
                                   ": publish less, or run with --ray-cluster=wireup=pmix");
  }
  auto answer = rendezvous::ExchangeThroughSrun({.host = host,
                                                 .invitation = invitation,
                                                 .rank = layout.rank,
                                                 .size = layout.size,
                                                 .values = rendezvous::EncodeValues(own),
                                                 .timeout = PmixClient::kDefaultFenceTimeout});
  if (!answer.ok()) return answer.status();
  if (layout.rank == 0 && LogEnabled(LogLevel::kDebug)) {
    std::size_t bytes = 0;
    for (const rendezvous::Bytes& values : *answer) bytes += values.size();
    Log(LogLevel::kDebug, "srun's rendezvous answered " + std::to_string(answer->size()) +
                              " ranks, " + std::to_string(bytes) + " bytes of values");
  }
  std::vector<rendezvous::Values> table;
  table.reserve(answer->size());
  for (std::uint32_t rank = 0; rank < answer->size(); ++rank) {
    auto values = rendezvous::DecodeValues((*answer)[rank]);
    if (!values.ok())
      return values.status().WithContext("srun's rendezvous answered for rank " +
                                         std::to_string(rank));
    table.push_back(std::move(values).value());
  }
  return ValuesFromTable(std::move(table));
}

}  // namespace

std::string WiredJob::Describe(std::uint32_t rank) const {
  return DescribeWith(*values, pmix->layout().size, rank);
}
Result<PeerLocation> WiredJob::LocationOf(std::uint32_t rank) const {
  return LocationWith(*values, pmix->layout().size, rank);
}

Result<std::unique_ptr<WiredJob>> WireUp(const WireUpOptions& options) {
  PhaseTimes phases;
  auto invitation = rendezvous::TakeInvitation();
  if (!invitation.ok()) return invitation.status();
  auto job = std::make_unique<WiredJob>();
  // UCX's start needs nothing from PMIx, and PMIx_Init spends most of its
  // time waiting for the server's answers (which, under `sray run`, the
  // launcher gives its ranks one after another): made side by side, a
  // rank's start is shorter by the UCX worker's. Neither library may then
  // add an environment variable while the other reads the environment;
  // both changes they would make are made here first.
  PmixClient::PrepareEnvironment();
  transport::SetUcxEnvironmentDefaults();
  const auto make_worker = [&options]() -> Result<std::shared_ptr<transport::UcxWorker>> {
    auto context = transport::UcxContext::Create(options.keepalive_interval);
    if (!context.ok()) return context.status();
    return transport::UcxWorker::Create(*context);
  };
  std::future<Result<std::shared_ptr<transport::UcxWorker>>> making_worker;
  try {
    making_worker = std::async(std::launch::async, make_worker);
  } catch (const std::system_error&) {
    // No thread to be had (a process or thread limit): one after the other.
    making_worker = std::async(std::launch::deferred, make_worker);
  }
  auto pmix = PmixClient::Connect();
  if (!pmix.ok()) return pmix.status();
  job->pmix = std::move(pmix).value();
  PmixClient& client = *job->pmix;
  const JobLayout layout = client.layout();
  phases.Mark("PMIx connect");

  auto worker = making_worker.get();
  if (!worker.ok()) return worker.status();
  auto full_address = (*worker)->Address(false);
  if (!full_address.ok()) return full_address.status();
  auto network_address = (*worker)->Address(true);
  if (!network_address.ok()) return network_address.status();
  phases.Mark("UCX worker");

  // Through srun, every value goes to every rank; through PMIx, the full
  // address only to this node's.
  rendezvous::Values own;
  const auto publish = [&](Scope scope, const std::string& key, std::span<const std::byte> value) {
    if (*invitation) {
      own[key] = transport::Bytes(value.begin(), value.end());
      return Status::Ok();
    }
    return client.Put(scope, key, value);
  };
  SRAY_RETURN_IF_ERROR(publish(Scope::kLocal, kFullAddressKey, *full_address));
  // The network address is published job-wide rather than PMIX_REMOTE: with
  // `sray run` one PMIx server hosts every emulated node, and PMIX_REMOTE
  // data never reaches a server's own clients. Processes on the same node
  // still prefer the full address.
  SRAY_RETURN_IF_ERROR(publish(Scope::kGlobal, kNetworkAddressKey, *network_address));
  const std::string own_location = std::to_string(layout.node_id) + " " + std::to_string(getpid()) +
                                   " " + std::to_string(ProcessStartTime(getpid())) + " " +
                                   MachineId(layout.hostname) + " " + layout.hostname;
  SRAY_RETURN_IF_ERROR(publish(Scope::kGlobal, kLocationKey, transport::BytesOf(own_location)));
  for (const auto& [key, value] : options.publish) {
    SRAY_RETURN_IF_ERROR(publish(Scope::kGlobal, key, value));
  }
  transport::JobToken secret{};
  if (layout.rank == 0) {
    // Rank 0 makes the secret; PMIx (or srun, given the step's token) hands
    // it only to processes of this job.
    auto fresh = NewJobSecret();
    if (!fresh.ok()) return fresh.status();
    secret = *fresh;
    SRAY_RETURN_IF_ERROR(publish(Scope::kGlobal, kJobSecretKey, secret));
  }
  if (*invitation) {
    phases.Mark("publish");
    auto exchanged = ValuesThroughSrun(**invitation, layout, own);
    if (!exchanged.ok()) return exchanged.status().WithContext("exchanging addresses through srun");
    job->values = std::move(exchanged).value();
    phases.Mark("srun exchange");
  } else {
    SRAY_RETURN_IF_ERROR(client.Commit());
    phases.Mark("publish");
    SRAY_RETURN_IF_ERROR(client.Fence());
    job->values = ValuesFromPmix(client);
    phases.Mark("PMIx fence");
  }
  JobValues& values = *job->values;
  if (layout.rank != 0) {
    auto shared = values.Get(0, kJobSecretKey);
    if (!shared.ok()) return shared.status().WithContext("cannot read the job secret");
    if (shared->size() != secret.size()) {
      return Status::Internal("the job secret published by rank 0 has the wrong size");
    }
    std::memcpy(secret.data(), shared->data(), secret.size());
  }

  job->secret = secret;
  JobValues* resolver = job->values.get();
  const std::uint32_t launched = layout.size;
  const std::uint32_t my_node = layout.node_id;
  transport::TransportOptions transport_options;
  transport_options.rank = layout.rank;
  transport_options.token = secret;
  transport_options.keepalive_interval = options.keepalive_interval;
  auto book = options.address_book;
  transport_options.resolve_address = [resolver, launched, my_node, book](std::uint32_t rank) {
    if (book) {
      if (auto entry = book->Find(rank)) return Result<transport::Bytes>(entry->address);
    }
    auto location = LocationWith(*resolver, launched, rank);
    if (!location.ok()) return Result<transport::Bytes>(location.status());
    // Same node: the full address, so UCX may use shared memory.
    const bool same_node = location->node_id == my_node;
    return resolver->Get(rank, same_node ? kFullAddressKey : kNetworkAddressKey);
  };
  transport_options.describe_rank = [resolver, launched, book](std::uint32_t rank) {
    if (book) {
      if (auto entry = book->Find(rank)) return entry->description;
    }
    return DescribeWith(*resolver, launched, rank);
  };
  transport_options.peer_alive = [resolver, launched, my_node, book](std::uint32_t rank) {
    if (book) {
      if (auto entry = book->Find(rank)) return entry->pid <= 0 || ::kill(entry->pid, 0) == 0;
    }
    // A worker that is no longer in the book has ended.
    if (book && rank >= launched) return false;
    auto location = LocationWith(*resolver, launched, rank);
    // Only a process on this node can be looked up here.
    if (!location.ok() || location->node_id != my_node || location->pid <= 0) return true;
    // No process of this node has a larger pid: a corrupt entry, not a live peer.
    if (location->pid > std::numeric_limits<pid_t>::max()) return false;
    return ProcessStartTime(static_cast<pid_t>(location->pid)) == location->start_time;
  };
  auto transport = transport::Transport::Create(std::move(transport_options), *worker);
  if (!transport.ok()) return transport.status();
  job->transport = std::move(transport).value();
  phases.Mark("transport");
  if (LogEnabled(LogLevel::kDebug)) {
    Log(LogLevel::kDebug, "rank " + std::to_string(layout.rank) + " wired up: " + phases.text());
  }
  return job;
}

}  // namespace sray::wire
