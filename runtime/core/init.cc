// sray::Init and sray::Shutdown: what each process of a step becomes.
//
// - A process started by a node manager is a worker (worker_main.cc).
// - Otherwise it was launched by srun or sray run and wires up through PMIx.
//   Every node runs a node manager; on node 0 it lives in the driver (global
//   rank 0), whose main goes on once every node has registered. On other
//   nodes the launched process is only the node manager: it serves until the
//   driver shuts the job down, or exits when the driver is gone.

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <stop_token>
#include <thread>

#include "common/host_name.h"
#include "common/log.h"
#include "common/thread_name.h"
#include "common/whole_number.h"
#include "core/actor_client.h"
#include "core/actor_directory.h"
#include "core/borrow_links.h"
#include "core/driver_dashboard.h"
#include "core/environment_check.h"
#include "core/head_service.h"
#include "core/local_mode.h"
#include "core/node_heartbeats.h"
#include "core/node_manager.h"
#include "core/owner.h"
#include "core/owner_after_bursts.h"
#include "core/process_runtime.h"
#include "core/protocol.h"
#include "core/shutdown_watch.h"
#include "core/worker_main.h"
#include "dashboard/dashboard_module.h"
#include "jobsetup/node_setup.h"
#include "jobsetup/node_shared_memory.h"
#include "jobsetup/task_environment.h"
#include "object/store_capacity.h"
#include "sched/resources.h"
#include "sray/api.h"
#include "wire/bootstrap.h"

namespace sray {
namespace {

using core::NodeDescription;

constexpr auto kRegistrationTimeout = std::chrono::seconds(120);
// How a process that cannot join its job ends (see Init).
constexpr int kLaunchFailedExitCode = 1;
// A step of ending the job that takes longer is named on stderr.
constexpr auto kSlowShutdownStep = std::chrono::seconds(5);
// How long the job's end waits for the dashboard's server threads: longer
// than a request's own bound (a node's status, a log read: 5 s each), so that
// a server busy with one still stops; only one stuck beyond that is let go.
constexpr auto kDashboardStopPatience = std::chrono::seconds(10);

void SayOnStderr(const std::string& line) {
  std::cerr << line << std::endl;
}

// Nodes whose manager the head can no longer reach. Written by the head's
// kNodeFailed handler, read by StoreUsage and Shutdown; thread-safe.
struct LostNodes {
  std::mutex mutex;
  std::vector<bool> lost;  // per node
  bool stopping = false;   // Shutdown ends the nodes itself: no loss then
  bool IsLost(std::uint32_t node) {
    std::lock_guard lock(mutex);
    return node < lost.size() && lost[node];
  }
};

// Torn down in Shutdown in the order that keeps every callback's target
// alive: the node manager, then the transport (which fails calls still in
// flight), then what their callbacks use.
struct DriverState {
  std::unique_ptr<wire::WiredJob> job;
  std::unique_ptr<core::NodeManager> node_manager;
  std::unique_ptr<core::Owner> owner;
  // Goes before the owner, and before the transport at Shutdown.
  std::unique_ptr<core::OwnerAfterBursts> owner_after_bursts;
  std::unique_ptr<core::ActorDirectory> directory;
  std::unique_ptr<core::HeadService> head;
  std::unique_ptr<core::ActorClient> actor_client;
  // The owner's links to other processes, and its service to them: the
  // service goes before the owner, the links after it.
  std::unique_ptr<core::TransportBorrowLinks> borrow_links;
  std::unique_ptr<core::OwnerService> owner_service;
  std::vector<std::uint32_t> node_manager_ranks;
  // Asks node managers over the transport: goes first at Shutdown.
  std::unique_ptr<core::DriverDashboard> dashboard;
  // log_dir=: where Shutdown lists the job's actors for `sray logs --actor`.
  std::filesystem::path actor_index;
  std::shared_ptr<LostNodes> lost_nodes;
  // Declares nodes lost whose heartbeats stopped (core/node_heartbeats.h);
  // stopped first at Shutdown, as it posts to the transport.
  std::jthread heartbeat_watch;
};

std::mutex driver_mutex;
std::unique_ptr<DriverState> driver;          // guarded by driver_mutex
std::unique_ptr<core::LocalMode> local_mode;  // guarded by driver_mutex

// node_timeout= (SRAY_NODE_TIMEOUT): how long the head waits for a node's
// heartbeat before it declares the node lost; 0: forever.
std::chrono::seconds NodeTimeoutOfJob() {
  constexpr std::chrono::seconds kDefault{30};
  const char* value = std::getenv("SRAY_NODE_TIMEOUT");
  if (value == nullptr) return kDefault;
  const auto seconds = WholeNumber<std::int64_t>(value);
  return seconds ? std::chrono::seconds(*seconds) : kDefault;
}

[[noreturn]] void ThrowLaunch(const std::string& what, const Status& status) {
  throw LaunchError("sray: " + what + ": " + status.message());
}

std::string ExecutablePath() {
  std::error_code error;
  auto path = std::filesystem::read_symlink("/proc/self/exe", error);
  return error ? std::string("/proc/self/exe") : path.string();
}

std::vector<std::string> ArgumentsOf(int argc, char** argv) {
  std::vector<std::string> arguments;
  arguments.reserve(static_cast<std::size_t>(std::max(argc, 1)));
  for (int index = 0; index < argc; ++index) arguments.emplace_back(argv[index]);
  if (arguments.empty()) arguments.push_back(ExecutablePath());
  return arguments;
}

std::uint32_t GpusFromSlurm() {
  for (const char* name : {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    std::uint32_t count = 1;
    for (const char* cursor = value; *cursor != '\0'; ++cursor) count += *cursor == ',' ? 1 : 0;
    return count;
  }
  return 0;
}

Result<std::uint64_t> StoreCapacity(std::uint32_t nodes_on_this_host) {
  std::optional<std::uint64_t> configured;
  if (const char* value = std::getenv("SRAY_OBJECT_STORE_MEMORY")) {
    configured = static_cast<std::uint64_t>(std::stoull(value));
  }
  return object::StoreCapacityHere("/dev/shm", configured, nodes_on_this_host);
}

core::NodeManagerConfig NodeConfig(const wire::WiredJob& job,
                                   const jobsetup::TaskEnvironment& environment, int argc,
                                   char** argv) {
  const auto layout = job.pmix->layout();
  core::NodeManagerConfig config;
  config.node_id = environment.node_id;
  config.rank = layout.rank;
  config.hostname = layout.hostname;
  config.total["CPU"] = environment.node_cpus;
  config.total["memory"] = static_cast<double>(environment.node_memory_bytes);
  config.gpu_devices = GpusFromSlurm();
  if (const char* listed = std::getenv("SRAY_RESOURCES")) {
    auto custom = sched::ParseResourceList(listed);
    if (!custom.ok()) ThrowLaunch("bad resources option", custom.status());
    for (const auto& [name, amount] : *custom) config.total[name] = amount;
  }
  if (config.total.contains("GPU")) {
    config.gpu_devices = static_cast<std::uint32_t>(config.total["GPU"]);
  } else if (config.gpu_devices > 0) {
    config.total["GPU"] = config.gpu_devices;
  }
  // Nodes on one machine (emulated ones have names of their own) share its
  // /dev/shm: the store's size is checked and divided among them.
  std::set<std::uint32_t> nodes_here;
  const auto own = job.LocationOf(layout.rank);
  for (std::uint32_t rank = 0; rank < layout.size; ++rank) {
    auto location = job.LocationOf(rank);
    if (location.ok() && own.ok() && location->machine == own->machine) {
      nodes_here.insert(location->node_id);
    }
  }
  auto capacity = StoreCapacity(static_cast<std::uint32_t>(nodes_here.size()));
  if (!capacity.ok()) ThrowLaunch("cannot size the object store", capacity.status());
  const std::string prefix = jobsetup::NodeSharedMemoryPrefix(
      environment.job_id, environment.step_id, environment.node_id);
  config.store = object::StoreConfig{
      .shared_memory_directory = jobsetup::kSharedMemoryDirectory,
      .name_prefix = prefix,
      .spill_directory = std::filesystem::path(environment.session_dir) / "spill",
      .capacity = *capacity,
      .node_id = environment.node_id,
      .on_spilled = {},
      .while_copying = {}};
  const auto cpus = static_cast<std::uint32_t>(environment.node_cpus);
  config.max_workers = std::max<std::uint32_t>(4, 2 * cpus);
  config.executable = ExecutablePath();
  config.arguments = ArgumentsOf(argc, argv);
  config.secret = job.secret;
  config.worker_logs_directory = (std::filesystem::path(environment.session_dir) / "logs").string();
  const char* log_to_driver = std::getenv("SRAY_LOG_TO_DRIVER");
  config.log_to_driver = log_to_driver == nullptr || std::string_view(log_to_driver) != "false";
  {
    std::ifstream note(std::filesystem::path(environment.session_dir) /
                       jobsetup::kEnvironmentNoteFile);
    std::getline(note, config.environment_note);
  }
  if (const char* log_dir = std::getenv("SRAY_LOG_DIR"); log_dir != nullptr && *log_dir != '\0') {
    config.worker_logs_copy =
        (std::filesystem::path(log_dir) / (environment.job_id + "." + environment.step_id) /
         ("node-" + std::to_string(environment.node_id)))
            .string();
  }
  config.head_rank = 0;
  if (layout.rank != 0) {
    auto head_address = job.values->Get(0, wire::kNetworkAddressKey);
    if (!head_address.ok()) ThrowLaunch("cannot learn the head's address", head_address.status());
    config.head_address = std::move(head_address).value();
  }
  return config;
}

// The lock of the step's conda environment on this node, when the step has
// one (the job-setup library wrote it and set SRAY_ENV_HASH).
std::optional<std::string> EnvironmentLock(const jobsetup::TaskEnvironment& environment) {
  if (std::getenv("SRAY_ENV_HASH") == nullptr) return std::nullopt;
  std::ifstream stream(std::filesystem::path(environment.session_dir) /
                       jobsetup::kEnvironmentLockFile);
  std::ostringstream text;
  text << stream.rdbuf();
  if (!stream) {
    throw LaunchError("sray: the step's environment lock is missing from " +
                      environment.session_dir +
                      ": the job-setup did not finish; see the step's earlier errors");
  }
  return text.str();
}

// Every node compares its environment with node 0's; a difference fails
// the step before user code, naming the node and the packages.
void CheckEnvironmentsMatch(const wire::WiredJob& job, const std::string& own_lock) {
  const auto layout = job.pmix->layout();
  auto reference = job.values->Get(0, core::kEnvironmentLockKey);
  if (!reference.ok()) ThrowLaunch("cannot read node 0's environment lock", reference.status());
  const std::string reference_lock(transport::TextOf(*reference));
  std::vector<std::string> problems;
  auto compare = [&](std::uint32_t rank, const std::string& lock) {
    auto location = job.LocationOf(rank);
    const std::uint32_t node = location.ok() ? location->node_id : rank;
    for (auto& difference : core::LockDifferences(reference_lock, 0, lock, node)) {
      problems.push_back("node " + std::to_string(node) +
                         (location.ok() ? " (" + location->hostname + ")" : std::string()) + ": " +
                         std::move(difference));
    }
  };
  if (layout.rank == 0) {
    for (std::uint32_t rank = 1; rank < layout.size; ++rank) {
      auto lock = job.values->Get(rank, core::kEnvironmentLockKey);
      if (!lock.ok())
        ThrowLaunch("cannot read rank " + std::to_string(rank) + "'s environment lock",
                    lock.status());
      compare(rank, std::string(transport::TextOf(*lock)));
    }
  } else {
    compare(layout.rank, own_lock);
  }
  if (problems.empty()) return;
  std::string message = "sray: the step's conda environments differ between nodes (";
  message += problems.size() == 1 ? std::string("1 package")
                                  : std::to_string(problems.size()) + " packages";
  message += "):";
  for (const auto& problem : problems) message += "\n  " + problem;
  message +=
      "\ngive every node the same environment: a packed file (`sray env pack`) on a path "
      "every node reads, or identical prefixes (check with `sray env verify`)";
  throw LaunchError(message);
}

// Sends `payload` to the head until it has a handler for it (the head may
// still be starting), for up to the registration timeout.
Result<transport::Bytes> CallHead(transport::Transport& transport, std::uint32_t method,
                                  const transport::Bytes& payload) {
  const auto deadline = std::chrono::steady_clock::now() + kRegistrationTimeout;
  // The head registers its handlers a millisecond or so after its wire-up:
  // the first retries come soon (each one was a whole launch's delay at a
  // fixed 5 ms), later ones less often.
  std::chrono::microseconds pause{200};
  while (true) {
    auto reply = transport.Call(0, method, payload, std::chrono::seconds(10));
    if (reply.ok() || reply.status().code() != StatusCode::kNotFound ||
        std::chrono::steady_clock::now() > deadline) {
      return reply;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(5000));
  }
}

[[noreturn]] void ServeNode(std::unique_ptr<wire::WiredJob> job,
                            std::unique_ptr<core::NodeManager> manager) {
  std::mutex mutex;
  std::condition_variable changed;
  bool shutdown = false;
  transport::Transport& transport = *job->transport;
  core::NodeManager* raw = manager.get();
  transport.RegisterOneWayHandler(core::kClusterView, [raw](std::uint32_t, auto payload) {
    auto view = core::Decode<core::ClusterView>(payload, "cluster view");
    if (view.ok()) raw->ApplyClusterView(std::move(view).value());
  });
  transport.RegisterRequestHandler(core::kShutdownNode,
                                   [&](std::uint32_t, auto) -> Result<transport::Bytes> {
                                     {
                                       std::lock_guard lock(mutex);
                                       shutdown = true;
                                     }
                                     changed.notify_all();
                                     return transport::Bytes{};
                                   });
  auto registered = CallHead(transport, core::kRegisterNode, core::Encode(manager->Description()));
  int exit_code = 0;
  if (!registered.ok()) {
    std::cerr << "sray: node " << manager->Description().node_id
              << ": cannot register with the head (rank 0): " << registered.status().message()
              << "\n";
    exit_code = 1;
  } else {
    const std::chrono::seconds node_timeout = NodeTimeoutOfJob();
    core::HeadSilence silence(node_timeout, std::chrono::steady_clock::now());
    std::unique_lock lock(mutex);
    while (!shutdown) {
      if (changed.wait_for(lock, std::chrono::seconds(1), [&] { return shutdown; })) break;
      lock.unlock();
      auto asked = std::chrono::steady_clock::now();
      auto alive = transport.Call(0, core::kHeartbeat, {}, std::chrono::seconds(30));
      // A call that timed out while this node was stopped (a freeze, swap)
      // says nothing about the head: asked once more, a live head answers
      // at once, and a dead one fails again.
      if (!alive.ok() && alive.status().code() != StatusCode::kPermissionDenied) {
        bool ending = false;
        {
          std::lock_guard guard(mutex);
          ending = shutdown;
        }
        if (!ending) {
          asked = std::chrono::steady_clock::now();
          alive = transport.Call(0, core::kHeartbeat, {}, std::chrono::seconds(30));
        }
      }
      lock.lock();
      const auto now = std::chrono::steady_clock::now();
      if (alive.ok()) silence.Answered(asked);
      if (!alive.ok() && !shutdown) {
        // Silent for longer than node_timeout (this node was stopped or
        // frozen: UCX then takes its own connections for timed out too),
        // the head has declared it lost and shut it out, or says so.
        const bool shut_out =
            alive.status().code() == StatusCode::kPermissionDenied || silence.DeclaredLost(now);
        if (shut_out) {
          // The job goes on without this node: its tasks ran again
          // elsewhere meanwhile. Leaving is this node's part, not a failure.
          std::cerr << "sray: node " << manager->Description().node_id << ": shut out of the job: "
                    << (alive.status().code() == StatusCode::kPermissionDenied
                            ? alive.status().message()
                            : "no answer from the head for " +
                                  DescribeSeconds(silence.Silent(now)) +
                                  ", more than node_timeout (" +
                                  std::to_string(node_timeout.count()) +
                                  " s): the head has declared this node lost (unless it is "
                                  "itself unreachable: " +
                                  alive.status().message() + ")")
                    << ": ending this node's workers and objects; the job goes on without it\n";
          exit_code = 0;
        } else {
          std::cerr << "sray: node " << manager->Description().node_id
                    << ": lost the driver (rank 0): " << alive.status().message()
                    << ": ending this node's workers and objects\n";
          exit_code = 1;
        }
        break;
      }
    }
  }
  core::ShutdownWatch watch(kSlowShutdownStep, SayOnStderr);
  watch.Step("ending this node's workers");
  manager.reset();
  watch.Step("closing the transport and PMIx");
  job.reset();
  // std::exit leaves this frame, and so the watch, in place: a process
  // stuck in its atexit handlers or static destructors is named too.
  watch.Step("exiting the process (atexit handlers, static destructors)");
  std::exit(exit_code);
}

void StartDriver(std::unique_ptr<wire::WiredJob> job, std::unique_ptr<core::NodeManager> manager,
                 std::uint32_t num_nodes, std::shared_ptr<transport::AddressBook> book) {
  transport::Transport& transport = *job->transport;
  struct Registry {
    std::mutex mutex;
    std::condition_variable changed;
    std::map<std::uint32_t, NodeDescription> nodes;
  };
  auto registry = std::make_shared<Registry>();
  registry->nodes[0] = manager->Description();
  transport.RegisterRequestHandler(
      core::kRegisterNode, [registry](std::uint32_t, auto payload) -> Result<transport::Bytes> {
        auto description = core::Decode<NodeDescription>(payload, "node registration");
        if (!description.ok()) return description.status();
        {
          std::lock_guard lock(registry->mutex);
          registry->nodes[description->node_id] = *description;
        }
        registry->changed.notify_all();
        return transport::Bytes{};
      });
  // Registered once, before any node can send one: the record behind it
  // exists once the nodes are known (below); beats before that only say
  // the head is there.
  struct HeartbeatRecord {
    std::mutex mutex;
    std::shared_ptr<core::NodeHeartbeats> heartbeats;  // guarded by mutex
    std::vector<std::uint32_t> ranks;                  // guarded by mutex
  };
  auto heartbeat_record = std::make_shared<HeartbeatRecord>();
  transport.RegisterRequestHandler(
      core::kHeartbeat, [heartbeat_record](std::uint32_t source, auto) -> Result<transport::Bytes> {
        std::lock_guard lock(heartbeat_record->mutex);
        const auto& ranks = heartbeat_record->ranks;
        const auto found = std::find(ranks.begin(), ranks.end(), source);
        if (heartbeat_record->heartbeats && found != ranks.end()) {
          heartbeat_record->heartbeats->Beat(static_cast<std::uint32_t>(found - ranks.begin()),
                                             std::chrono::steady_clock::now());
        }
        return transport::Bytes{};
      });
  core::ClusterView view;
  {
    std::unique_lock lock(registry->mutex);
    const bool all = registry->changed.wait_for(
        lock, kRegistrationTimeout, [&] { return registry->nodes.size() == num_nodes; });
    if (!all) {
      std::string missing;
      for (std::uint32_t node = 0; node < num_nodes; ++node) {
        if (!registry->nodes.contains(node))
          missing += (missing.empty() ? "" : ", ") + std::to_string(node);
      }
      throw LaunchError("sray: nodes " + missing + " did not register with the head within " +
                        std::to_string(kRegistrationTimeout.count()) +
                        " s: check their output for errors; every process of the step must call "
                        "sray::Init");
    }
    for (const auto& [node_id, description] : registry->nodes) view.nodes.push_back(description);
  }
  const auto encoded = core::Encode(view);
  for (const auto& node : view.nodes) {
    if (node.node_id == 0) continue;
    const Status sent = transport.Send(node.rank, core::kClusterView, encoded);
    if (!sent.ok()) ThrowLaunch("cannot reach node " + std::to_string(node.node_id), sent);
  }
  auto state = std::make_unique<DriverState>();
  std::vector<std::string> view_hosts;
  for (const auto& node : view.nodes) {
    state->node_manager_ranks.push_back(node.rank);
    view_hosts.push_back(node.hostname);
  }
  core::NodeManager* raw = manager.get();
  const std::vector<std::uint32_t> ranks = state->node_manager_ranks;
  transport::Transport* raw_transport = &transport;
  // The head reaches every node manager by message, node 0's (in this
  // process) too: the transport delivers posts to its own rank like any
  // other, in order.
  core::ActorDirectory::Hooks hooks;
  hooks.submit_to_node = [raw_transport, ranks](std::uint32_t node, const core::TaskSpec& spec) {
    raw_transport->Post(ranks.at(node), core::kSubmitTask, core::Encode(spec));
  };
  hooks.stop_worker = [raw_transport, ranks](std::uint32_t node, core::ActorKill kill) {
    raw_transport->Post(ranks.at(node), core::kStopActorWorker, core::Encode(kill));
  };
  hooks.notify = [raw_transport, ranks](std::uint32_t node, const core::ActorChanged& changed) {
    raw_transport->Post(ranks.at(node), core::kActorChanged, core::Encode(changed));
  };
  state->directory = std::make_unique<core::ActorDirectory>(view.nodes, job->pmix->layout().rank,
                                                            std::move(hooks));
  state->directory->RegisterHandlers(transport);
  manager->ApplyClusterView(std::move(view));
  state->owner = std::make_unique<core::Owner>(
      core::OwnerIdentity{.rank = job->pmix->layout().rank, .node_id = 0}, manager->store_access(),
      [raw](core::TaskSpec spec) { raw->Submit(std::move(spec)); });
  state->owner->SetMaxTasksInFlight(core::MaxTasksInFlightOfJob());
  state->owner_after_bursts = std::make_unique<core::OwnerAfterBursts>(transport, *state->owner);
  state->head = core::MakeLocalHead(*state->directory);
  state->actor_client =
      std::make_unique<core::ActorClient>(*state->owner, *state->head, transport, book, HostName());
  state->owner->SetActorCalls(state->actor_client.get());
  state->borrow_links = std::make_unique<core::TransportBorrowLinks>(transport, book);
  state->owner->SetBorrowLinks(*state->borrow_links);
  // The driver's node manager runs in this process, on its rank.
  state->owner_service = std::make_unique<core::OwnerService>(
      transport, *state->owner, job->pmix->layout().rank, std::move(book));
  // A node manager's failure, as the transport sees it (in a UCX callback,
  // where nothing may block), comes back to this process as a message, and
  // the head handles it there like any other.
  state->lost_nodes = std::make_shared<LostNodes>();
  state->lost_nodes->lost.assign(ranks.size(), false);
  const std::uint32_t head_rank = job->pmix->layout().rank;
  transport.SetPeerFailureHandler([raw_transport, ranks, head_rank](std::uint32_t rank, const Status& failure) {
    const auto found = std::find(ranks.begin() + 1, ranks.end(), rank);
    if (found == ranks.end()) return;
    core::NodeLost lost{.node = static_cast<std::uint32_t>(found - ranks.begin()),
                        .cause = failure.message(),
                        .rank = rank};
    raw_transport->Post(head_rank, core::kNodeFailed, core::Encode(lost));
  });
  transport.RegisterOneWayHandler(
      core::kNodeFailed, [raw_transport, ranks, hostnames = std::move(view_hosts), lost_nodes = state->lost_nodes,
                          directory = state->directory.get(), head_rank](std::uint32_t source, auto payload) {
        if (source != head_rank) return;  // only this process's own transport reports failures
        auto lost = core::Decode<core::NodeLost>(payload, "node failure");
        if (!lost.ok() || lost->node == 0 || lost->node >= ranks.size()) return;
        lost->rank = ranks[lost->node];
        {
          std::lock_guard lock(lost_nodes->mutex);
          if (lost_nodes->stopping || lost_nodes->lost[lost->node]) return;
          lost_nodes->lost[lost->node] = true;
        }
        std::cerr << "sray: node " << lost->node << " (" << hostnames[lost->node] << ") was lost: " << lost->cause
                  << "; the job goes on without it: its tasks run again on other nodes (within their "
                     "retries), its actors restart elsewhere (within their restarts) or die, and objects "
                     "only it held are rebuilt from lineage or fail with ObjectLostError"
                  << std::endl;
        directory->OnNodeLost(lost->node, lost->cause);
        const auto message = core::Encode(*lost);
        for (std::uint32_t node = 0; node < ranks.size(); ++node) {
          if (lost_nodes->IsLost(node)) continue;
          raw_transport->Post(ranks[node], core::kNodeLost, message);
        }
      });
  // Heartbeats, now that the nodes are known: a node that stops sending
  // them without dying (frozen, cut off) is declared lost like a dead one.
  auto heartbeats = std::make_shared<core::NodeHeartbeats>(ranks.size(), NodeTimeoutOfJob(),
                                                           std::chrono::steady_clock::now());
  {
    std::lock_guard lock(heartbeat_record->mutex);
    heartbeat_record->heartbeats = heartbeats;
    heartbeat_record->ranks = ranks;
  }
  state->heartbeat_watch =
      std::jthread([heartbeats, raw_transport, ranks, head_rank](const std::stop_token& stop) {
        NameThisThread("sray-heartbeat");
        std::mutex mutex;
        std::condition_variable_any wake;
        std::unique_lock lock(mutex);
        while (!stop.stop_requested()) {
          (void)wake.wait_for(lock, stop, core::NodeHeartbeats::kPeriod, [] { return false; });
          if (stop.stop_requested()) break;
          for (const std::uint32_t node : heartbeats->Overdue(std::chrono::steady_clock::now())) {
            const core::NodeLost lost{
                .node = node,
                .cause = "no heartbeat from its node manager for " +
                         std::to_string(heartbeats->timeout().count()) +
                         " s: the node is frozen, overloaded or cut off from the head "
                         "(--ray-cluster=node_timeout=SECONDS sets how long to wait, 0: forever)",
                .rank = ranks[node]};
            raw_transport->Post(head_rank, core::kNodeFailed, core::Encode(lost));
          }
        }
      });
  if (const char* session = std::getenv("SRAY_SESSION_DIR"); session != nullptr && *session != '\0') {
    // Only the job user's, like every file of the session directory.
    const std::string marker = (std::filesystem::path(session) / jobsetup::kHandlesNodeLossFile).string();
    const int descriptor = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (descriptor >= 0) ::close(descriptor);
  }
  state->node_manager = std::move(manager);
  state->job = std::move(job);
  core::SetProcessRuntime(state->owner.get());
  std::lock_guard lock(driver_mutex);
  driver = std::move(state);
}

}  // namespace

namespace {
// Init's work; every way it cannot join a job throws LaunchError.
void ShutdownAtExit() {
  static std::once_flag shutdown_at_exit;
  std::call_once(shutdown_at_exit, [] {
    if (std::atexit([] {
          Shutdown();
          // What runs after sray's end (atexit handlers registered before
          // Init, static destructors) is watched too, so that a process
          // that never exits says where. Never destroyed: it watches until
          // the process is gone (reachable from here, so no leak is reported).
          static core::ShutdownWatch* const after_shutdown =
              new core::ShutdownWatch(kSlowShutdownStep, SayOnStderr);
          after_shutdown->Step(
              "exiting the process after sray's end (atexit handlers, static destructors)");
        }) != 0) {
      std::cerr << "sray: cannot register Shutdown at exit: call sray::Shutdown() before main "
                   "returns\n";
    }
  });
}

// Debug line of where joining the job took its time (bench/launch reads it).
void LogJoinTimes(std::uint32_t rank, std::chrono::steady_clock::time_point started,
                  std::chrono::steady_clock::time_point wired,
                  std::chrono::steady_clock::time_point managed, const char* last_phase) {
  if (!LogEnabled(LogLevel::kDebug)) return;
  const auto now = std::chrono::steady_clock::now();
  Log(LogLevel::kDebug, "rank " + std::to_string(rank) + " joined the job in " +
                            DescribeMilliseconds(now - started) + ": wire-up " +
                            DescribeMilliseconds(wired - started) + ", node manager " +
                            DescribeMilliseconds(managed - wired) + ", " + last_phase + " " +
                            DescribeMilliseconds(now - managed));
}

void JoinJob(int argc, char** argv, const InitOptions& options) {
  // Init from a task's code: the worker already runs (its launch variables
  // are gone, so the test below would no longer say so).
  if (core::WorkerRunning()) return;
  if (core::IsWorkerProcess()) core::RunWorker();
  {
    std::lock_guard lock(driver_mutex);
    if (driver || local_mode) return;
  }
  const bool launched = std::getenv("SRAY_ROLE") != nullptr;
  if (options.local_mode || core::LocalModeRequested()) {
    if (launched) {
      throw LaunchError(
          "sray: local mode (SRAY_LOCAL_MODE=1 or InitOptions::local_mode) is for a program "
          "started directly, but this one was started by srun --ray-cluster or sray run: unset "
          "SRAY_LOCAL_MODE, or start the program without a launcher");
    }
    std::lock_guard lock(driver_mutex);
    local_mode = core::LocalMode::Start();
    ShutdownAtExit();
    return;
  }
  const auto joining = std::chrono::steady_clock::now();
  auto environment =
      jobsetup::ReadTaskEnvironment([](const char* name) { return std::getenv(name); });
  if (!environment.ok()) {
    ThrowLaunch("this process was not started by sray",
                Status::NotFound(environment.status().message() +
                                 ", or set SRAY_LOCAL_MODE=1 to run its tasks and actors in this "
                                 "one process"));
  }

  auto book = std::make_shared<transport::AddressBook>();
  const std::optional<std::string> environment_lock = EnvironmentLock(*environment);
  wire::WireUpOptions wire_options{.keepalive_interval = "1s", .address_book = book, .publish = {}};
  if (environment_lock) {
    wire_options.publish.emplace_back(core::kEnvironmentLockKey,
                                      transport::BytesOf(*environment_lock));
  }
  auto job = wire::WireUp(wire_options);
  if (!job.ok()) ThrowLaunch("wire-up failed", job.status());
  const auto wired = std::chrono::steady_clock::now();
  const auto layout = (*job)->pmix->layout();
  if (environment_lock) CheckEnvironmentsMatch(**job, *environment_lock);
  if (layout.local_rank != 0) {
    throw LaunchError(
        "sray: rank " + std::to_string(layout.rank) + " is process " +
        std::to_string(layout.local_rank + 1) +
        " of its node, but a sray program runs one process per node (its node manager "
        "starts the workers): launch with --ntasks-per-node=1 (srun) or --tasks-per-node 1 "
        "(sray run)");
  }
  auto config = NodeConfig(**job, *environment, argc, argv);
  auto manager = core::NodeManager::Create(std::move(config), *(*job)->transport, book);
  if (!manager.ok()) ThrowLaunch("cannot start the node manager", manager.status());
  const auto managed = std::chrono::steady_clock::now();
  if (layout.rank != 0) {
    LogJoinTimes(layout.rank, joining, wired, managed, "serving");
    ServeNode(std::move(job).value(), std::move(manager).value());
  }
  // The dashboard's module loads while the head waits for the nodes (a
  // jthread: joined however StartDriver ends).
  std::jthread dashboard_module;
  if (core::DashboardWanted()) dashboard_module = std::jthread(&dashboard::LoadDashboardModule);
  StartDriver(std::move(job).value(), std::move(manager).value(), environment->num_nodes,
              std::move(book));
  if (dashboard_module.joinable()) dashboard_module.join();
  {
    std::lock_guard lock(driver_mutex);
    if (const char* log_dir = std::getenv("SRAY_LOG_DIR"); log_dir != nullptr && *log_dir != '\0') {
      driver->actor_index = std::filesystem::path(log_dir) /
                            (environment->job_id + "." + environment->step_id) / "actors.json";
    }
    driver->dashboard =
        core::StartDriverDashboard(*environment, *driver->job->transport,
                                   driver->node_manager_ranks, *driver->directory, std::cerr);
  }
  LogJoinTimes(0, joining, wired, managed, "driver and dashboard");
  ShutdownAtExit();
}

}  // namespace

void Init(int argc, char** argv) {
  Init(argc, argv, InitOptions{});
}

void Init(int argc, char** argv, const InitOptions& options) {
  try {
    JoinJob(argc, argv, options);
  } catch (const LaunchError& error) {
    // Nothing can go on without a job, and an uncaught exception would end
    // the program with "terminate called..." and a core dump: one line, and
    // a plain non-zero exit (atexit handlers run, nothing was started).
    std::cerr << error.what() << std::endl;
    std::exit(kLaunchFailedExitCode);
  }
}

void Shutdown() {
  if (core::OnLocalModeThread()) {
    // Ending local mode joins the thread this call runs on.
    std::cerr << "sray: Shutdown was called from a task or actor in local mode: ignored; call it "
                 "from main (it also runs when main returns)\n";
    return;
  }
  std::unique_ptr<DriverState> state;
  std::unique_ptr<core::LocalMode> local_state;
  {
    std::lock_guard lock(driver_mutex);
    state = std::move(driver);
    local_state = std::move(local_mode);
  }
  local_state.reset();
  if (!state) return;
  core::ShutdownWatch watch(kSlowShutdownStep, SayOnStderr);
  // Nodes told to end below stop their heartbeats: none is lost for that.
  state->heartbeat_watch = std::jthread();
  watch.Step("stopping the dashboard");
  if (state->dashboard && state->dashboard->server &&
      !state->dashboard->server->Stop(kDashboardStopPatience)) {
    std::cerr << "sray: ending the job: the dashboard's server did not stop within "
              << std::chrono::duration<double>(kDashboardStopPatience).count()
              << " s (a request stuck in it): the job ends without waiting for it" << std::endl;
    // Destroying it would wait for its threads again. A request still in it
    // may touch what Shutdown frees next: a risk taken only after every
    // request's own bound has passed, rather than a job that never ends.
    (void)state->dashboard->server.release();
  }
  state->dashboard.reset();
  core::SetProcessRuntime(nullptr);
  watch.Step("stopping actor calls");
  state->actor_client->Stop();
  // Answers still owed to borrowers need the transport: before it goes.
  watch.Step("ending the owner service");
  state->owner_service.reset();
  transport::Transport& transport = *state->job->transport;
  {
    std::lock_guard lock(state->lost_nodes->mutex);
    state->lost_nodes->stopping = true;
  }
  // Every node is told at once, and ends its workers while the others do.
  struct Answers {
    std::mutex mutex;
    std::condition_variable arrived;
    std::size_t missing = 0;  // guarded by mutex
  };
  auto answers = std::make_shared<Answers>();
  watch.Step("telling the nodes to end");
  for (std::size_t node = 1; node < state->node_manager_ranks.size(); ++node) {
    if (state->lost_nodes->IsLost(static_cast<std::uint32_t>(node))) continue;
    {
      std::lock_guard lock(answers->mutex);
      ++answers->missing;
    }
    transport.CallAsync(state->node_manager_ranks[node], core::kShutdownNode, {},
                        [answers](const Result<transport::Bytes>&) {
                          {
                            std::lock_guard lock(answers->mutex);
                            --answers->missing;
                          }
                          answers->arrived.notify_all();
                        });
  }
  {
    std::unique_lock lock(answers->mutex);
    (void)answers->arrived.wait_for(lock, std::chrono::seconds(10),
                                    [&answers] { return answers->missing == 0; });
  }
  watch.Step("ending this node's workers");
  state->node_manager.reset();
  if (!state->actor_index.empty()) {
    const Status written = core::WriteActorIndex(*state->directory, state->actor_index);
    if (!written.ok()) {
      std::cerr << "sray: the list of actors was not written to log_dir: " << written.message()
                << "; `sray logs --actor` will not find them there, --node and --worker will\n";
    }
  }
  state->directory->DropWaiters();
  watch.Step("closing the transport and PMIx");
  state->owner_after_bursts.reset();
  state->job.reset();
  watch.Step("freeing the driver's state");
  state->owner->SetActorCalls(nullptr);
  state->actor_client.reset();
  state->owner.reset();
  state->borrow_links.reset();
  state->head.reset();
  state->directory.reset();
}

std::vector<NodeStoreUsage> StoreUsage() {
  std::lock_guard lock(driver_mutex);
  // Local mode keeps objects in the owner's memory: no store holds any.
  if (local_mode) return {NodeStoreUsage{}};
  if (!driver) throw LaunchError("sray: StoreUsage is for the driver, after sray::Init");
  std::vector<NodeStoreUsage> usage;
  const auto local = driver->node_manager->StoreUsage();
  usage.push_back({.node_id = 0,
                   .capacity = local.capacity,
                   .in_memory = local.in_memory,
                   .spilled = local.spilled,
                   .objects = local.objects});
  for (std::uint32_t node = 1; node < driver->node_manager_ranks.size(); ++node) {
    if (driver->lost_nodes->IsLost(node)) continue;  // its store went with it
    auto reply =
        driver->job->transport->Call(driver->node_manager_ranks[node], core::kStoreUsage, {});
    if (!reply.ok())
      throw Error("sray: cannot ask node " + std::to_string(node) +
                  " for its store usage: " + reply.status().message());
    auto remote = core::Decode<core::StoreUsage>(*reply, "store usage");
    if (!remote.ok()) throw Error("sray: " + remote.status().message());
    usage.push_back({.node_id = node,
                     .capacity = remote->capacity,
                     .in_memory = remote->in_memory,
                     .spilled = remote->spilled,
                     .objects = remote->objects});
  }
  return usage;
}

bool IsInitialized() {
  std::lock_guard lock(driver_mutex);
  return driver != nullptr || local_mode != nullptr || core::WorkerRunning() ||
         core::IsWorkerProcess();
}

}  // namespace sray
