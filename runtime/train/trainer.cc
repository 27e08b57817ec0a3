// The driver's side of TorchTrainer::Fit: places the workers, starts the
// group, stores rank 0's reports and checkpoints, and restarts the group
// after a failure while max_failures allows. Free of LibTorch: it speaks to
// the workers through sray's actors only.

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/hex.h"
#include "common/random_bytes.h"
#include "sray/api.h"
#include "sray/internal/training_runs.h"
#include "sray/train/result.h"
#include "sray/train/trainer.h"
#include "train/backends_available.h"
#include "train/checkpoint_storage.h"
#include "train/progress_log.h"
#include "train/train_worker.h"
#include "train/worker_protocol.h"

namespace sray::train::internal {
namespace {

using Clock = std::chrono::steady_clock;
using WorkerHandle = sray::ActorHandle<TrainWorker>;

constexpr auto kStartupTimeout = std::chrono::minutes(2);
constexpr auto kPoll = std::chrono::milliseconds(500);
// After the first failure of an attempt, how long to listen for the others:
// a worker's death makes its peers' collectives fail moments later, and the
// death, not their errors, is the cause to report.
constexpr auto kCauseGrace = std::chrono::seconds(3);

std::string DefaultName() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  ::localtime_r(&now, &local);
  char text[64];
  (void)std::strftime(text, sizeof text, "TorchTrainer_%Y-%m-%d_%H-%M-%S", &local);
  return text;
}

std::string RandomHex(std::size_t bytes) {
  std::vector<std::byte> random(bytes);
  const Status filled = FillRandom(random, "the group's secret");
  if (!filled.ok()) {
    throw sray::Error("sray: training " + filled.message() +
                      ": the kernel's random source (getrandom, /dev/urandom) must work on the "
                      "driver's node; ask the cluster's admins");
  }
  return HexOf(random);
}

std::string DescribeResources(const std::map<std::string, double>& resources) {
  std::ostringstream text;
  text << "{";
  bool first = true;
  for (const auto& [name, amount] : resources) {
    text << (first ? "" : ", ") << name << ": " << amount;
    first = false;
  }
  text << "}";
  return text.str();
}

// One worker's failure, as the driver saw it.
struct Failure {
  int rank = -1;
  std::uint32_t node_id = 0;
  std::int64_t pid = 0;
  std::string cause;
  int preference = 0;  // higher: likelier the root cause
};

// A dead process is the likeliest root cause; an error of the loop's own
// next; a failed collective (a peer went away) last.
Failure Classify(int rank, std::uint32_t node_id, std::int64_t pid, const std::exception& error) {
  Failure failure{rank, node_id, pid, error.what(), 1};
  if (dynamic_cast<const sray::ActorDiedError*>(&error) != nullptr) {
    // The actor's message names internals (the TrainWorker actor); keep how
    // its process ended.
    const std::string what = error.what();
    const auto ended = what.find("ended with ");
    failure.cause = ended == std::string::npos
                        ? "died: " + what
                        : "died: its process " + what.substr(ended, what.find(';', ended) - ended);
    failure.preference = 3;
  } else if (const auto* task = dynamic_cast<const sray::TaskError*>(&error)) {
    const std::string& type = task->remote_type();
    const std::string& message = task->remote_message();
    // By what the message says, not by type: c10::Error is also what a
    // shape mismatch in the user's own code throws.
    bool collective = type.find("DistBackendError") != std::string::npos;
    for (const char* sign : {"gloo", "Gloo", "NCCL", "Connection closed by peer", "Connection reset by peer",
                             "Broken pipe", "Timed out", "timed out"}) {
      collective = collective || message.find(sign) != std::string::npos;
    }
    failure.cause = "failed: the training loop threw " + type + ": " + task->remote_message();
    failure.preference = collective ? 1 : 2;
  } else {
    failure.cause = "failed: " + failure.cause;
  }
  return failure;
}

struct RunState {
  const TrainingRequest& request;
  std::string name;
  std::string run_directory;
  std::map<std::string, double> resources;
  int threads = 1;
  std::uint64_t next_checkpoint_index = 0;
  std::optional<StoredCheckpoint> latest;  // what a restart resumes from
  std::vector<RankedCheckpoint> kept;
  std::map<std::uint64_t, std::string> kept_paths;
  std::uint64_t reports = 0;
  Result result;
  // In the run directory for this Fit: workers whose node reads it there
  // stage their checkpoints in it instead of sending them.
  std::string storage_token;
};

void Say(const RunState& state, const std::string& line) {
  if (!state.request.run.verbose) return;
  std::cout << "sray train " << state.name << ": " << line << std::endl;
}

// `parts`: the report's checkpoint, rank 0's part first; none without one.
void StoreReport(RunState& state, int attempt, WorkerEvent event,
                 std::vector<CheckpointPart> parts) {
  ReportRecord record;
  record.report = ++state.reports;
  record.attempt = attempt;
  record.unix_time = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  record.seconds = event.seconds;
  record.samples = event.samples;
  record.metrics = event.metrics;
  if (!parts.empty()) {
    const std::uint64_t index = state.next_checkpoint_index++;
    auto stored = StoreCheckpointParts(state.run_directory, index, std::move(parts));
    if (!stored.ok()) {
      throw sray::Error("sray: training cannot store the reported checkpoint: " + stored.status().message() +
                        ": free space there or choose another RunConfig::storage_path");
    }
    state.latest = StoredCheckpoint{index, *stored};
    state.kept.push_back({index, event.metrics});
    state.kept_paths[index] = *stored;
    record.checkpoint = CheckpointDirectoryName(index);
    for (std::uint64_t doomed : CheckpointsToRemove(state.kept, state.request.run.checkpoint_config)) {
      Status removed = RemoveCheckpoint(state.kept_paths[doomed]);
      if (!removed.ok()) std::cerr << "sray: warning: " << removed.message() << std::endl;
      state.kept_paths.erase(doomed);
      state.kept.erase(std::remove_if(state.kept.begin(), state.kept.end(),
                                      [&](const RankedCheckpoint& kept) { return kept.index == doomed; }),
                       state.kept.end());
    }
  }
  state.result.metrics = event.metrics;
  state.result.metrics_history.push_back(std::move(event.metrics));
  if (state.request.run.verbose) std::cout << ProgressLine(state.name, record) << std::endl;
  sray::internal::RecordTrainingReport(sray::internal::TrainingReport{
      .name = state.name,
      .report = record.report,
      .attempt = record.attempt,
      .unix_time = record.unix_time,
      .seconds = record.seconds,
      .samples = record.samples,
      .metrics = record.metrics,
      .checkpoint = record.checkpoint.value_or(std::string())});
  Status logged = AppendLine(state.run_directory + "/metrics.jsonl", JsonLine(record));
  if (!logged.ok()) std::cerr << "sray: warning: cannot log metrics: " << logged.message() << std::endl;
}

// Ends every process of the attempt's group: nothing of it outlives it.
class GroupGuard {
 public:
  explicit GroupGuard(sray::PlacementGroup group) : group_(group) {}
  [[nodiscard]] const sray::PlacementGroup& group() const { return group_; }
  ~GroupGuard() {
    if (rendezvous_) {
      try {
        rendezvous_->Kill(true);
      } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): already dead
      }
    }
    for (const auto& worker : workers_) {
      try {
        worker.Kill(true);
      } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): already dead
      }
    }
    try {
      sray::RemovePlacementGroup(group_);
    } catch (const std::exception&) {  // NOLINT(bugprone-empty-catch): already gone
    }
  }
  GroupGuard(const GroupGuard&) = delete;
  GroupGuard& operator=(const GroupGuard&) = delete;
  std::vector<WorkerHandle>& workers() { return workers_; }
  std::optional<sray::ActorHandle<RendezvousStore>>& rendezvous() { return rendezvous_; }

 private:
  sray::PlacementGroup group_;
  std::vector<WorkerHandle> workers_;
  std::optional<sray::ActorHandle<RendezvousStore>> rendezvous_;  // this attempt's
};

// One attempt: a group from start to end. Returns the failure, if any.
std::optional<Failure> RunAttempt(RunState& state, int attempt) {
  const ScalingConfig& scaling = state.request.scaling;
  const int world_size = scaling.num_workers;
  // What the failed group staged and never reported in full.
  if (attempt > 0) (void)RemovePartialCheckpoints(state.run_directory);
  sray::PlacementGroupCreationOptions options;
  options.bundles.assign(static_cast<std::size_t>(world_size), state.resources);
  options.strategy = scaling.placement_strategy;
  GroupGuard guard(sray::CreatePlacementGroup(options));
  // CreatePlacementGroup above throws InfeasibleResourcesError when no
  // layout could ever hold the workers; here they wait for room.
  const sray::PlacementGroup& group = guard.group();
  {
    const auto waiting_since = Clock::now();
    while (!group.Wait(std::chrono::seconds(30))) {
      const auto waited = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - waiting_since);
      Say(state, "still waiting for room for " + std::to_string(world_size) + " workers of " +
                     DescribeResources(state.resources) + " after " + std::to_string(waited.count()) +
                     " s: other actors or groups hold the resources");
    }
  }
  const std::vector<std::uint32_t> bundle_nodes = group.BundleNodes();

  // Ranks follow nodes, so that a node's workers have consecutive ranks;
  // bundle 0 stays rank 0 (it hosts the rendezvous).
  std::vector<std::uint32_t> node_order;
  for (std::uint32_t node : bundle_nodes) {
    if (std::find(node_order.begin(), node_order.end(), node) == node_order.end()) node_order.push_back(node);
  }
  std::vector<int> bundle_of_rank(static_cast<std::size_t>(world_size));
  for (int index = 0; index < world_size; ++index) bundle_of_rank[static_cast<std::size_t>(index)] = index;
  auto node_rank_of = [&](std::uint32_t node) {
    return static_cast<int>(std::find(node_order.begin(), node_order.end(), node) - node_order.begin());
  };
  std::stable_sort(bundle_of_rank.begin(), bundle_of_rank.end(), [&](int left, int right) {
    return node_rank_of(bundle_nodes[static_cast<std::size_t>(left)]) <
           node_rank_of(bundle_nodes[static_cast<std::size_t>(right)]);
  });

  // The group meets through an actor of its own (outside the placement
  // group: it holds no resources), over sray's authenticated transport.
  const sray::ActorHandle<RendezvousStore> rendezvous = sray::Actor(RendezvousStore::Create).Remote();
  guard.rendezvous() = rendezvous;
  std::vector<WorkerHandle>& handles = guard.workers();
  for (int rank = 0; rank < world_size; ++rank) {
    handles.push_back(sray::Actor(TrainWorker::Create)
                          .SetPlacementGroup(group, bundle_of_rank[static_cast<std::size_t>(rank)])
                          .SetResources(state.resources)
                          .SetMaxConcurrency(2)
                          .Remote());
  }
  std::vector<sray::ObjectRef<WorkerDescription>> prepared;
  prepared.reserve(handles.size());
  for (int rank = 0; rank < world_size; ++rank) {
    prepared.push_back(handles[static_cast<std::size_t>(rank)]
                           .Task(&TrainWorker::Prepare)
                           .Remote(rank == 0, state.run_directory, state.storage_token));
  }
  std::vector<WorkerDescription> descriptions;
  for (int rank = 0; rank < world_size; ++rank) {
    const std::uint32_t node = bundle_nodes[static_cast<std::size_t>(bundle_of_rank[static_cast<std::size_t>(rank)])];
    try {
      descriptions.push_back(sray::Get(prepared[static_cast<std::size_t>(rank)],
                                       std::chrono::duration_cast<std::chrono::milliseconds>(kStartupTimeout)));
    } catch (const std::exception& error) {
      return Classify(rank, node, 0, error);
    }
  }

  std::map<std::uint32_t, int> workers_on_node;
  for (const auto& description : descriptions) ++workers_on_node[description.node_id];
  std::map<std::uint32_t, int> next_local_rank;
  WorkerAssignment common;
  common.function = state.request.function;
  common.config = state.request.config;
  common.experiment_name = state.name;
  common.world_size = world_size;
  common.attempt = attempt;
  common.use_gpu = scaling.use_gpu;
  common.threads = state.threads;
  common.rendezvous = rendezvous;
  common.group_secret = RandomHex(32);
  common.master_address = descriptions.front().hostname;
  common.master_port = descriptions.front().master_port;
  common.timeout_milliseconds = state.request.torch.timeout.count();
  common.bucket_bytes = state.request.torch.bucket_bytes;
  common.first_bucket_bytes = state.request.torch.first_bucket_bytes;
  common.broadcast_buffers = state.request.torch.broadcast_buffers;
  CheckpointFiles resume_files;
  // Workers whose node sees the run directory copy a checkpoint stored there
  // themselves; the others get it through the object store.
  const bool latest_in_storage =
      state.latest && std::filesystem::path(state.latest->path).parent_path() ==
                          std::filesystem::path(state.run_directory);
  const bool every_worker_sees_storage =
      std::all_of(descriptions.begin(), descriptions.end(),
                  [](const WorkerDescription& description) { return description.sees_storage; });
  if (state.latest && !(latest_in_storage && every_worker_sees_storage)) {
    auto files = ReadCheckpointDirectory(state.latest->path);
    if (!files.ok()) {
      throw sray::Error("sray: training cannot read the checkpoint to resume from: " +
                        files.status().message() + ": keep " + state.latest->path +
                        " whole and readable while training runs, or start again from another "
                        "checkpoint (TorchTrainer::SetResumeFromCheckpoint)");
    }
    resume_files = std::move(files).value();
  }
  if (state.latest) {
    common.has_checkpoint = true;
    common.checkpoint_index = state.latest->index;
  }
  common.run_directory = state.run_directory;
  // One copy in the object store, read by every worker (in place on its node).
  const sray::ObjectRef<CheckpointFiles> resume_ref = sray::Put(resume_files);

  std::vector<sray::ObjectRef<WorkerEvent>> runs;
  for (int rank = 0; rank < world_size; ++rank) {
    WorkerAssignment assignment = common;
    const WorkerDescription& description = descriptions[static_cast<std::size_t>(rank)];
    assignment.world_rank = rank;
    assignment.local_rank = next_local_rank[description.node_id]++;
    assignment.local_world_size = workers_on_node[description.node_id];
    assignment.node_rank = node_rank_of(description.node_id);
    assignment.stage_checkpoints = description.sees_storage;
    if (state.latest && latest_in_storage && description.sees_storage)
      assignment.checkpoint_path = state.latest->path;
    runs.push_back(handles[static_cast<std::size_t>(rank)].Task(&TrainWorker::Run).Remote(assignment, resume_ref));
  }
  if (attempt == 0) {
    std::string nodes;
    std::set<std::uint32_t> sending_nodes;  // whose workers send their checkpoints
    for (const auto& description : descriptions) {
      nodes += (nodes.empty() ? "" : ",") + std::to_string(description.node_id);
      if (!description.sees_storage) sending_nodes.insert(description.node_id);
    }
    std::string sending;
    for (const std::uint32_t node : sending_nodes)
      sending += (sending.empty() ? "" : ",") + std::to_string(node);
    Say(state,
        std::to_string(world_size) + " workers on nodes " + nodes + ", results in " +
            state.run_directory +
            (sending.empty() ? " (checkpoints copied there by each worker)"
                             : " (checkpoints sent to the driver from nodes " + sending +
                                   ", whose workers do not stage them there: a "
                                   "RunConfig::storage_path every node sees saves the transfer)"));
  }

  // NextReport(n) also tells rank 0 that the driver has stored n reports:
  // its Report returns only then.
  std::uint64_t stored = 0;
  std::optional<sray::ObjectRef<WorkerEvent>> next_report = handles.front().Task(&TrainWorker::NextReport).Remote(stored);
  std::vector<bool> finished(static_cast<std::size_t>(world_size), false);
  // Checkpoint parts stored per rank (rank 0's count is `stored`).
  std::vector<std::uint64_t> parts_stored(static_cast<std::size_t>(world_size), 0);
  // The latest Acknowledge per rank (its answer is not needed).
  std::vector<std::optional<sray::ObjectRef<bool>>> acknowledgements(static_cast<std::size_t>(world_size));
  std::vector<Failure> failures;
  std::optional<Clock::time_point> first_failure;
  auto fail = [&](int rank, const std::exception& error) {
    const WorkerDescription& description = descriptions[static_cast<std::size_t>(rank)];
    failures.push_back(Classify(rank, description.node_id, description.pid, error));
    finished[static_cast<std::size_t>(rank)] = true;
    if (!first_failure) first_failure = Clock::now();
  };
  while (true) {
    std::vector<sray::ObjectRef<WorkerEvent>> watched;
    std::vector<int> owners;  // rank of each watched run; -1: the report
    for (int rank = 0; rank < world_size; ++rank) {
      if (finished[static_cast<std::size_t>(rank)]) continue;
      watched.push_back(runs[static_cast<std::size_t>(rank)]);
      owners.push_back(rank);
    }
    // Also during the grace after a failure: a report rank 0 handed over
    // before the failure is complete, and is stored.
    if (next_report) {
      watched.push_back(*next_report);
      owners.push_back(-1);
    }
    if (first_failure && (watched.empty() || Clock::now() - *first_failure > kCauseGrace)) break;
    if (watched.empty()) break;
    const auto ready = sray::Wait(watched, 1, kPoll);
    for (const auto& done : ready.ready) {
      const auto position = static_cast<std::size_t>(
          std::find_if(watched.begin(), watched.end(),
                       [&](const auto& candidate) { return candidate.id() == done.id(); }) -
          watched.begin());
      const int owner = owners[position];
      std::optional<WorkerEvent> report;
      try {
        WorkerEvent event = sray::Get(done);
        if (owner >= 0) {
          finished[static_cast<std::size_t>(owner)] = true;
        } else if (event.kind == static_cast<std::uint8_t>(WorkerEventKind::kReport)) {
          report = std::move(event);
        } else {
          next_report.reset();
        }
      } catch (const sray::Error& error) {
        if (dynamic_cast<const sray::GetTimeoutError*>(&error) != nullptr) throw;
        fail(owner >= 0 ? owner : 0, error);
        if (owner < 0) next_report.reset();
      }
      if (report) {
        // Other ranks' checkpoint parts: asked for now (those ranks wait in
        // Report), merged under rank 0's; without every part nothing of the
        // checkpoint is stored.
        const std::vector<std::int32_t> part_ranks = report->checkpoint_ranks;
        bool complete = true;
        std::vector<CheckpointPart> parts;
        if (report->has_checkpoint) {
          parts.push_back(CheckpointPart{std::move(report->checkpoint), std::move(report->staged)});
        }
        if (!part_ranks.empty()) {
          // Asked of all at once; each waits as long as a collective may (a
          // dead worker fails its call at once).
          std::vector<sray::ObjectRef<WorkerEvent>> asked;
          for (const std::int32_t rank : part_ranks) {
            asked.push_back(handles[static_cast<std::size_t>(rank)].Task(&TrainWorker::NextReport).Remote(
                parts_stored[static_cast<std::size_t>(rank)]));
          }
          for (std::size_t part_index = 0; part_index < part_ranks.size(); ++part_index) {
            const std::int32_t rank = part_ranks[part_index];
            try {
              WorkerEvent part = sray::Get(asked[part_index], state.request.torch.timeout);
              if (part.kind != static_cast<std::uint8_t>(WorkerEventKind::kReport) || !part.has_checkpoint) {
                // Its loop ended (threw, as a rule): its run, still watched,
                // says why. This guess is the cause only if it says nothing.
                const WorkerDescription& description = descriptions[static_cast<std::size_t>(rank)];
                failures.push_back(
                    Failure{rank, description.node_id, description.pid,
                            "failed: its loop ended without the checkpoint part it reported", 0});
                if (!first_failure) first_failure = Clock::now();
                complete = false;
                break;
              }
              parts.push_back(CheckpointPart{std::move(part.checkpoint), std::move(part.staged)});
            } catch (const sray::Error& error) {
              fail(rank, error);
              complete = false;
              break;
            }
          }
        }
        // Outside the try: a report the driver cannot store (a full disk)
        // ends Fit; it is no worker's failure to restart for.
        if (complete) {
          StoreReport(state, attempt, std::move(*report), std::move(parts));
          ++stored;
          for (const std::int32_t rank : part_ranks) {
            const auto index = static_cast<std::size_t>(rank);
            acknowledgements[index] = handles[index].Task(&TrainWorker::Acknowledge).Remote(++parts_stored[index]);
          }
        }
        next_report.reset();
        if (!first_failure) next_report = handles.front().Task(&TrainWorker::NextReport).Remote(stored);
      }
    }
  }
  if (failures.empty()) return std::nullopt;
  // The likeliest cause; among equals, the first that arrived.
  return *std::max_element(failures.begin(), failures.end(), [](const Failure& left, const Failure& right) {
    return left.preference < right.preference;
  });
}

}  // namespace

Result Fit(const TrainingRequest& request) {
  const ScalingConfig& scaling = request.scaling;
  if (scaling.num_workers < 1) {
    throw sray::ConfigError("sray: ScalingConfig::num_workers is " + std::to_string(scaling.num_workers) +
                            ": a run needs at least one worker");
  }
  if (request.run.failure_config.max_failures < -1) {
    throw sray::ConfigError("sray: FailureConfig::max_failures is " +
                            std::to_string(request.run.failure_config.max_failures) +
                            ": use 0 (no restart), a positive count, or -1 (unlimited)");
  }
  if (Status valid = ValidateCheckpointConfig(request.run.checkpoint_config); !valid.ok()) {
    throw sray::ConfigError("sray: " + valid.message());
  }
  if (const std::string missing = MissingBackend(scaling.use_gpu); !missing.empty()) {
    throw sray::ConfigError("sray: " + missing);
  }
  if (request.torch.timeout.count() <= 0) {
    throw sray::ConfigError(
        "sray: TorchConfig::timeout must be positive: give the longest a collective may wait, e.g. "
        "std::chrono::minutes(30)");
  }
  // Local mode has no session directory (the default storage was "/train")
  // and runs actors as threads of this process, where each training worker
  // needs a process of its own (its process group, its Torch threads).
  if (sray::CurrentNode().session_dir.empty()) {
    throw sray::ConfigError(
        "sray: TorchTrainer::Fit cannot run in local mode (InitOptions::local_mode or "
        "SRAY_LOCAL_MODE=1): its workers need processes of their own: run the program with "
        "sray run -N1 (or more nodes), or srun --ray-cluster");
  }

  RunState state{request, request.run.name.empty() ? DefaultName() : request.run.name,
                 {},      {},
                 1,       0,
                 {},      {},
                 {},      0,
                 {},      {}};
  std::string storage = request.run.storage_path;
  if (storage.empty()) storage = sray::CurrentNode().session_dir + "/train";
  state.run_directory = storage + "/" + state.name;
  std::error_code error;
  std::filesystem::create_directories(state.run_directory, error);
  if (error) {
    throw sray::ConfigError("sray: cannot create the run directory " + state.run_directory + ": " +
                            error.message() + ": choose a writable RunConfig::storage_path");
  }
  if (Status cleaned = RemovePartialCheckpoints(state.run_directory); !cleaned.ok()) {
    throw sray::Error("sray: " + cleaned.message() + ": remove the partial checkpoints in " +
                      state.run_directory + " by hand, or choose another RunConfig::storage_path");
  }
  // Without the marker every worker sends its checkpoints, as where the
  // directory is not shared: slower for large ones, never wrong.
  state.storage_token = RandomHex(32);
  if (Status marked = WriteStorageMarker(state.run_directory, state.storage_token); !marked.ok()) {
    std::cerr << "sray: warning: workers send their checkpoints to the driver instead of copying "
                 "them into "
              << state.run_directory << ": " << marked.message() << std::endl;
    state.storage_token.clear();
  }
  // However Fit ends: the marker, and staged parts no store took (a failed
  // group's, or an incomplete report's).
  struct StorageTidyAtEnd {
    const std::string& run_directory;
    ~StorageTidyAtEnd() {
      (void)RemoveStorageMarker(run_directory);
      (void)RemovePartialCheckpoints(run_directory);
    }
  } storage_tidy_at_end{state.run_directory};
  // Checkpoints of an earlier Fit in this directory: numbering goes on after
  // them, and pruning ranks them by the metrics they were reported with.
  const auto logged = CheckpointMetricsFromLog(state.run_directory + "/metrics.jsonl");
  for (const StoredCheckpoint& stored : ListCheckpoints(state.run_directory)) {
    const auto metrics = logged.find(std::filesystem::path(stored.path).filename().string());
    state.kept.push_back({stored.index, metrics == logged.end() ? Metrics{} : metrics->second});
    state.kept_paths[stored.index] = stored.path;
    state.next_checkpoint_index = stored.index + 1;
  }
  if (request.resume_from) {
    state.latest = StoredCheckpoint{0, request.resume_from->path()};
    const std::string leaf = std::filesystem::path(request.resume_from->path()).filename().string();
    for (const StoredCheckpoint& stored : ListCheckpoints(state.run_directory)) {
      if (std::filesystem::path(stored.path).filename() == leaf) state.latest->index = stored.index;
    }
  }

  state.resources = scaling.resources_per_worker;
  if (state.resources.empty()) state.resources["CPU"] = 1;
  if (scaling.use_gpu && !state.resources.contains("GPU")) state.resources["GPU"] = 1;
  const auto cpus = state.resources.find("CPU");
  state.threads = cpus == state.resources.end() ? 1 : std::max(1, static_cast<int>(cpus->second));
  state.result.path = state.run_directory;

  // The dashboard shows the run from here; whatever ends Fit ends it there.
  sray::internal::RecordTrainingStart(sray::internal::TrainingRunStart{.name = state.name,
                                                                       .storage_path = state.run_directory,
                                                                       .num_workers = scaling.num_workers,
                                                                       .use_gpu = scaling.use_gpu});
  struct RunEnd {
    const std::string& name;
    std::string outcome = "failed: Fit ended with an error on the driver";
    ~RunEnd() { sray::internal::RecordTrainingEnd(name, outcome); }
  } run_end{state.name};

  const int max_failures = request.run.failure_config.max_failures;
  std::vector<Failure> history;
  for (int attempt = 0;; ++attempt) {
    std::optional<Failure> failure = RunAttempt(state, attempt);
    if (!failure) break;
    history.push_back(*failure);
    const int failures = static_cast<int>(history.size());
    auto describe = [](const Failure& which) {
      return "worker " + std::to_string(which.rank) + " (node " + std::to_string(which.node_id) +
             (which.pid > 0 ? ", pid " + std::to_string(which.pid) : std::string()) + ") " +
             which.cause;
    };
    const std::string where = describe(*failure);
    if (max_failures != -1 && failures > max_failures) {
      // The first failure is the one named: later groups often fail because
      // of it, and it is the one to fix.
      const Failure& first = history.front();
      std::string what = "sray: training " + state.name + " failed: " + describe(first);
      if (failures > 1) {
        what += " (then " + std::to_string(failures - 1) + " restart(s); the last failure was " +
                where + ")";
      }
      what += max_failures == 0 ? ": fix the cause, or allow restarts with FailureConfig::max_failures"
                                : ": max_failures (" + std::to_string(max_failures) + ") is used up";
      run_end.outcome = "failed: " + describe(first);
      throw TrainingFailedError(what, first.rank, first.node_id, first.pid, first.cause,
                                failures - 1);
    }
    sray::internal::RecordTrainingRestart(state.name, failures);
    Say(state, where + "; restarting the group (" + std::to_string(failures) +
                   (max_failures == -1 ? "" : " of " + std::to_string(max_failures)) + ") from " +
                   (state.latest ? std::filesystem::path(state.latest->path).filename().string()
                                 : std::string("the start")));
  }
  state.result.num_failures = static_cast<int>(history.size());
  if (state.latest) state.result.checkpoint = Checkpoint::FromDirectory(state.latest->path);
  for (const RankedCheckpoint& ranked : BestFirst(state.kept, request.run.checkpoint_config)) {
    state.result.best_checkpoints.emplace_back(Checkpoint::FromDirectory(state.kept_paths[ranked.index]),
                                               ranked.metrics);
  }
  run_end.outcome = "finished";
  Say(state, "finished: " + std::to_string(state.reports) + " reports, " +
                 std::to_string(state.result.num_failures) + " restart(s)" +
                 (state.latest ? ", latest " + std::filesystem::path(state.latest->path).filename().string()
                               : std::string()));
  return state.result;
}

}  // namespace sray::train::internal
