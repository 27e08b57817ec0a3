#include "core/driver_dashboard.h"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "common/host_name.h"
#include "common/log.h"
#include "common/private_file.h"
#include "common/whole_number.h"
#include "core/protocol.h"
#include "core/training_runs.h"
#include "dashboard/dashboard_address.h"
#include "dashboard/dashboard_module.h"

namespace sray::core {
namespace {

constexpr const char* kDefaultAddress = "127.0.0.1:0";
// A node that does not answer within this is shown with the error.
constexpr auto kNodeStatusTimeout = std::chrono::seconds(5);
// The newest actors and placement groups listed; all are counted.
constexpr std::size_t kActorsListed = 1000;

// Asks every node manager at once and waits for all answers, at most
// kNodeStatusTimeout in all: a hung node costs one timeout, not one each.
// Answers that come later are dropped (the state they fill is shared with
// the callbacks, which may outlive this call).
std::vector<Result<transport::Bytes>> AskEveryNode(transport::Transport& transport,
                                                   const std::vector<std::uint32_t>& ranks,
                                                   std::uint32_t method, transport::Bytes request) {
  struct Answers {
    std::mutex mutex;
    std::condition_variable arrived;
    std::vector<std::optional<Result<transport::Bytes>>> replies;
    std::size_t pending = 0;
    transport::Bytes request;  // CallAsync reads it until each call ends
  };
  auto answers = std::make_shared<Answers>();
  answers->replies.resize(ranks.size());
  answers->pending = ranks.size();
  answers->request = std::move(request);
  for (std::size_t node = 0; node < ranks.size(); ++node) {
    // With a timeout of its own: a hung node would otherwise keep one
    // pending call per page refresh until it is declared lost.
    transport.CallAsync(
        ranks[node], method, answers->request,
        [answers, node](Result<transport::Bytes> reply) {
          std::lock_guard lock(answers->mutex);
          answers->replies[node] = std::move(reply);
          --answers->pending;
          answers->arrived.notify_all();
        },
        std::chrono::duration_cast<std::chrono::milliseconds>(kNodeStatusTimeout));
  }
  std::unique_lock lock(answers->mutex);
  answers->arrived.wait_for(lock, kNodeStatusTimeout, [&] { return answers->pending == 0; });
  std::vector<Result<transport::Bytes>> replies;
  replies.reserve(ranks.size());
  for (auto& reply : answers->replies) {
    replies.push_back(
        reply ? std::move(*reply)
              : Result<transport::Bytes>(Status::DeadlineExceeded(
                    "no answer within " + std::to_string(kNodeStatusTimeout.count()) + " s")));
  }
  return replies;
}

dashboard::NodeSnapshot NodeFrom(std::uint32_t node, Result<transport::Bytes> reply,
                                 std::vector<dashboard::EventEntry>& events) {
  dashboard::NodeSnapshot snapshot;
  snapshot.node_id = node;
  if (!reply.ok()) {
    snapshot.error = reply.status().message();
    return snapshot;
  }
  auto status = Decode<NodeStatus>(*reply, "node status");
  if (!status.ok()) {
    snapshot.error = status.status().message();
    return snapshot;
  }
  snapshot.hostname = status->hostname;
  snapshot.total = status->total;
  snapshot.available = status->available;
  snapshot.queued_tasks = status->queued;
  snapshot.worker_processes = status->workers;
  snapshot.store_capacity = status->store.capacity;
  snapshot.store_in_memory = status->store.in_memory;
  snapshot.store_spilled = status->store.spilled;
  snapshot.store_objects = status->store.objects;
  snapshot.load_average_1m = status->load_average_1m;
  snapshot.memory_total_bytes = status->memory_total;
  snapshot.memory_available_bytes = status->memory_available;
  snapshot.resident_bytes = status->resident;
  snapshot.tasks.reserve(status->tasks.size());
  for (auto& counts : status->tasks) {
    snapshot.tasks.push_back({.function = std::move(counts.function),
                              .queued = counts.queued,
                              .running = counts.running,
                              .finished = counts.finished,
                              .failed = counts.failed});
  }
  for (auto& event : status->events) {
    events.push_back({.unix_time = event.unix_time,
                      .node = node,
                      .kind = std::move(event.kind),
                      .message = std::move(event.message)});
  }
  return snapshot;
}

Result<WorkerLogs> AskLogs(transport::Transport& transport, std::uint32_t rank,
                           const WorkerLogsRequest& request) {
  auto reply = transport.Call(rank, kWorkerLogs, Encode(request), kNodeStatusTimeout);
  if (!reply.ok()) return reply.status();
  return Decode<WorkerLogs>(*reply, "worker logs");
}

const char* ActorStateName(std::uint8_t state) {
  switch (static_cast<ActorState>(state)) {
    case ActorState::kPending: return "pending";
    case ActorState::kAlive: return "alive";
    case ActorState::kRestarting: return "restarting";
    case ActorState::kDead: return "dead";
  }
  return "unknown";
}

const char* StrategyName(PlacementStrategy strategy) {
  switch (strategy) {
    case PlacementStrategy::kPack: return "PACK";
    case PlacementStrategy::kSpread: return "SPREAD";
    case PlacementStrategy::kStrictPack: return "STRICT_PACK";
    case PlacementStrategy::kStrictSpread: return "STRICT_SPREAD";
  }
  return "unknown";
}

// The head's part of the snapshot: actors, placement groups, their events.
void AddHead(ActorDirectory& directory, dashboard::ClusterSnapshot& snapshot) {
  for (auto& view : directory.Actors(kActorsListed, snapshot.actors_total)) {
    ActorInfo& info = view.info;
    snapshot.actors.push_back(dashboard::ActorSnapshot{.id = info.id,
                                                       .name = std::move(info.name),
                                                       .class_name = std::move(info.factory),
                                                       .state = ActorStateName(info.state),
                                                       .node = info.node,
                                                       .worker = info.worker_rank,
                                                       .hostname = std::move(info.hostname),
                                                       .pid = info.pid,
                                                       .restarts = view.restarts,
                                                       .max_restarts = view.max_restarts,
                                                       .resources = std::move(view.resources),
                                                       .placement_group = view.placement_group,
                                                       .cause = std::move(info.cause)});
  }
  for (auto& view : directory.PlacementGroups(kActorsListed, snapshot.placement_groups_total)) {
    snapshot.placement_groups.push_back(
        dashboard::PlacementGroupSnapshot{.id = view.info.id,
                                          .name = std::move(view.name),
                                          .strategy = StrategyName(view.strategy),
                                          .state = view.info.removed  ? "removed"
                                                   : view.info.placed ? "placed"
                                                                      : "pending",
                                          .bundles = std::move(view.bundles),
                                          .bundle_nodes = std::move(view.info.bundle_nodes)});
  }
  for (auto& event : directory.events().Recent()) {
    snapshot.events.push_back({.unix_time = event.unix_time,
                               .node = -1,
                               .kind = std::move(event.kind),
                               .message = std::move(event.message)});
  }
}

std::vector<dashboard::TrainingRunSnapshot> TrainingSnapshot() {
  std::vector<dashboard::TrainingRunSnapshot> runs;
  for (const TrainingRunRecord& record : TrainingRuns()) {
    dashboard::TrainingRunSnapshot run;
    run.name = record.start.name;
    run.storage_path = record.start.storage_path;
    run.state = record.state;
    run.num_workers = record.start.num_workers;
    run.use_gpu = record.start.use_gpu;
    run.restarts = record.restarts;
    run.started_unix_time = record.started_unix_time;
    run.points_dropped = record.reports_dropped;
    run.points.reserve(record.reports.size());
    for (const internal::TrainingReport& report : record.reports) {
      run.points.push_back(dashboard::TrainingPoint{
          .report = report.report,
          .attempt = report.attempt,
          .unix_time = report.unix_time,
          .samples_per_second =
              report.seconds > 0 ? static_cast<double>(report.samples) / report.seconds : 0,
          .metrics = report.metrics,
          .checkpoint = report.checkpoint});
    }
    runs.push_back(std::move(run));
  }
  return runs;
}

// The Slurm cluster this step runs on (slurmstepd sets it in every task's
// environment); empty under `sray run`.
std::string ClusterName() {
  const char* name = std::getenv("SLURM_CLUSTER_NAME");
  return name != nullptr ? name : "";
}

}  // namespace

bool DashboardWanted() {
  const char* configured = std::getenv("SRAY_DASHBOARD");
  return configured == nullptr || std::string_view(configured) != "off";
}

std::unique_ptr<DriverDashboard> StartDriverDashboard(const jobsetup::TaskEnvironment& environment,
                                                      transport::Transport& transport,
                                                      std::vector<std::uint32_t> node_manager_ranks,
                                                      ActorDirectory& directory,
                                                      std::ostream& messages) {
  const char* configured = std::getenv("SRAY_DASHBOARD");
  const std::string address =
      configured != nullptr && *configured != '\0' ? configured : kDefaultAddress;
  if (address == "off") return nullptr;
  const std::string job = environment.job_id + "." + environment.step_id;
  auto refuse = [&](const std::string& why) -> std::unique_ptr<DriverDashboard> {
    messages << "sray: the dashboard of job " << job << " did not start: " << why
             << "; the job runs without it" << std::endl;
    return nullptr;
  };
  // The option was checked at launch; the variable may still be set by hand.
  const auto colon = address.rfind(':');
  const auto port = colon == std::string::npos
                        ? std::nullopt
                        : WholeNumber<std::uint16_t>(address.substr(colon + 1));
  if (!port || colon == 0) {
    return refuse("dashboard=" + address +
                  " is not HOST:PORT: give dashboard=127.0.0.1:0, a "
                  "HOST:PORT of the head node, or off");
  }
  auto token = dashboard::RandomSecret(32);
  if (!token.ok()) return refuse(token.status().message());

  dashboard::DashboardOptions options;
  options.host = address.substr(0, colon);
  options.port = *port;
  options.token = *token;
  const std::vector<std::uint32_t> node_manager_ranks_copy = node_manager_ranks;
  options.snapshot = [&transport, &directory, ranks = std::move(node_manager_ranks),
                      job_id = environment.job_id,
                      step_id = environment.step_id]() -> Result<dashboard::ClusterSnapshot> {
    dashboard::ClusterSnapshot snapshot;
    snapshot.job_id = job_id;
    snapshot.step_id = step_id;
    auto replies = AskEveryNode(transport, ranks, kNodeStatus, {});
    for (std::uint32_t node = 0; node < ranks.size(); ++node) {
      snapshot.nodes.push_back(NodeFrom(node, std::move(replies[node]), snapshot.events));
    }
    AddHead(directory, snapshot);
    return snapshot;
  };
  options.training = &TrainingSnapshot;
  options.log_index =
      [&transport,
       ranks = node_manager_ranks_copy]() -> Result<std::vector<dashboard::LogFileEntry>> {
    std::vector<dashboard::LogFileEntry> files;
    auto replies = AskEveryNode(transport, ranks, kWorkerLogs, Encode(WorkerLogsRequest{}));
    for (std::uint32_t node = 0; node < ranks.size(); ++node) {
      if (!replies[node].ok()) continue;  // a node that does not answer has none to show
      auto logs = Decode<WorkerLogs>(*replies[node], "worker logs");
      if (!logs.ok()) continue;
      for (const auto& file : logs->files) {
        files.push_back({.node = node, .worker = file.worker, .bytes = file.size});
      }
    }
    return files;
  };
  options.log_read = [&transport, ranks = node_manager_ranks_copy](
                         std::uint32_t node, std::uint32_t worker, std::int64_t offset,
                         std::uint64_t max_bytes) -> Result<dashboard::LogChunk> {
    if (node >= ranks.size()) return Status::NotFound("there is no node " + std::to_string(node));
    auto logs =
        AskLogs(transport, ranks[node],
                WorkerLogsRequest{.worker = worker, .offset = offset, .max_bytes = max_bytes});
    if (!logs.ok()) return logs.status();
    return dashboard::LogChunk{.node = node,
                               .worker = worker,
                               .offset = logs->offset,
                               .size = logs->size,
                               .data = std::move(logs->data)};
  };
  auto server = dashboard::StartDashboardServer(std::move(options));
  if (!server.ok()) return refuse(server.status().message());

  auto result = std::make_unique<DriverDashboard>();
  result->server = std::move(server).value();
  const std::string host = HostName();
  const std::filesystem::path home = dashboard::UserHome();
  // Before the file exists, so that a driver killed in between leaves
  // nothing the cleanup cannot find.
  if (Status noted = dashboard::NoteJobsFileHome(environment.session_dir, home); !noted.ok()) {
    Log(LogLevel::kWarning,
        "cannot note where the jobs file is (" + noted.message() +
            "): if this driver is killed, `sray status` may list its job until you remove " +
            dashboard::JobsFilePath(home, environment.job_id, environment.step_id).string());
  }
  auto jobs_file = dashboard::JobsFile::Write(
      home, dashboard::JobsFileContent{.job_id = environment.job_id,
                                       .step_id = environment.step_id,
                                       .url = result->server->Url(),
                                       .local_url = result->server->LocalUrl(),
                                       .token = *token,
                                       .head_hostname = host,
                                       .pid = static_cast<long>(::getpid()),
                                       .cluster = ClusterName()});
  std::string where_token;
  if (jobs_file.ok()) {
    result->jobs_file = std::move(jobs_file).value();
    where_token = "token in " + result->jobs_file->path().string();
  } else {
    where_token = "no jobs file (" + jobs_file.status().message() + ")";
  }
  // Whoever reads the one-time link first logs in, so it is printed only
  // where the job user alone reads the output (a Slurm output file is often
  // readable by others); elsewhere `sray login` asks for one with the token.
  const bool output_private =
      jobsetup::ReadOutputPrivate([](const char* name) { return std::getenv(name); });
  messages << "sray: dashboard of job " << job << ": "
           << (output_private ? result->server->NewLoginUrl()
                              : result->server->Url() + " (a login link: sray login " + job + ";")
           << (output_private ? " (" : " ") << where_token << "; from another machine: "
           << dashboard::SshTunnelCommand(result->server->LocalUrl(), host) << ")" << std::endl;
  return result;
}

Status WriteActorIndex(ActorDirectory& directory, const std::filesystem::path& path) {
  dashboard::ClusterSnapshot snapshot;
  AddHead(directory, snapshot);
  return WritePrivateFile(path, dashboard::ActorsJson(snapshot));
}

}  // namespace sray::core
