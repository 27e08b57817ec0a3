#include "train/worker_session.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/nn/module.h>

#include "common/whole_number.h"
#include "sray/errors.h"
#include "sray/internal/function_registry.h"
#include "sray/node.h"
#include "sray/train/context.h"
#include "sray/train/prepare.h"
#include "train/collectives.h"
#include "train/gradient_reducer.h"
#include "train/rendezvous_store.h"
#include "train/session_state.h"

namespace sray::train {
namespace internal {
namespace {

void SetVariable(const char* name, const std::string& value) { ::setenv(name, value.c_str(), 1); }

// The torchrun variables, so that LibTorch code written for torchrun finds
// its place (MASTER_PORT is free for a store of the program's own).
void ExportTorchrunVariables(const WorkerAssignment& assignment) {
  SetVariable("RANK", std::to_string(assignment.world_rank));
  SetVariable("LOCAL_RANK", std::to_string(assignment.local_rank));
  SetVariable("WORLD_SIZE", std::to_string(assignment.world_size));
  SetVariable("LOCAL_WORLD_SIZE", std::to_string(assignment.local_world_size));
  SetVariable("GROUP_RANK", std::to_string(assignment.node_rank));
  SetVariable("NODE_RANK", std::to_string(assignment.node_rank));
  SetVariable("MASTER_ADDR", assignment.master_address);
  SetVariable("MASTER_PORT", std::to_string(assignment.master_port));
}

constexpr std::string_view kRestorePrefix = "train-restore-rank";

std::string RestoreBase() {
  try {
    return sray::CurrentNode().session_dir;
  } catch (const std::exception&) {
    return std::filesystem::temp_directory_path().string();
  }
}

std::string RestoreDirectory(const std::string& base, const WorkerAssignment& assignment) {
  return base + "/" + std::string(kRestorePrefix) + std::to_string(assignment.world_rank) + "-" +
         std::to_string(::getpid());
}

}  // namespace

// A worker killed while it trained (a failed group is ended that way) never
// ran its ClearAtEnd: its restored copy would stay until the step ends, one
// more per restart. A live process's copy (another worker's) is left alone.
void RemoveRestoreCopiesOfEndedWorkers(const std::string& base) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(base, error)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(kRestorePrefix)) continue;
    const auto dash = name.rfind('-');
    if (dash == std::string::npos) continue;
    const auto pid = WholeNumber<pid_t>(std::string_view(name).substr(dash + 1));
    if (!pid || *pid <= 0) continue;
    if (::kill(*pid, 0) == 0 || errno != ESRCH) continue;
    std::error_code ignored;
    std::filesystem::remove_all(entry.path(), ignored);
  }
}

std::uint16_t FreePortForUserCode() { return PickFreePort(); }

void RunWorkerSession(const WorkerAssignment& assignment, const CheckpointFiles& resume,
                      ReportChannel& reports) {
  struct CloseAtEnd {
    ReportChannel& channel;
    ~CloseAtEnd() { channel.Close(); }
  } close_at_end{reports};

  ExportTorchrunVariables(assignment);
  at::set_num_threads(std::max(1, assignment.threads));

  auto session = std::make_shared<Session>();
  session->context = std::make_unique<TrainContext>(TrainContext::Layout{
      assignment.world_size, assignment.world_rank, assignment.local_rank,
      assignment.local_world_size, assignment.node_rank, assignment.use_gpu,
      assignment.experiment_name});
  session->assignment = assignment;
  session->reports = &reports;
  session->last_report = std::chrono::steady_clock::now();

  const std::string restore_base = RestoreBase();
  RemoveRestoreCopiesOfEndedWorkers(restore_base);
  const std::string restore = RestoreDirectory(restore_base, assignment);
  std::error_code ignored;
  std::filesystem::remove_all(restore, ignored);
  struct ClearAtEnd {
    std::string restore;
    ~ClearAtEnd() {
      SetCurrentSession(nullptr);
      std::error_code error;
      std::filesystem::remove_all(restore, error);
    }
  } clear_at_end{restore};
  if (assignment.has_checkpoint) {
    const std::string path = restore + "/" + CheckpointDirectoryName(assignment.checkpoint_index);
    Status written = assignment.checkpoint_path.empty()
                         ? WriteCheckpointDirectory(resume, path)
                         : CopyCheckpointDirectory(assignment.checkpoint_path, path);
    if (!written.ok()) {
      throw Error("sray: cannot restore the checkpoint on this worker: " + written.message() +
                  ": check the space in the session directory's file system");
    }
    session->checkpoint_path = path;
  }

  GroupOptions group;
  group.rank = assignment.world_rank;
  group.world_size = assignment.world_size;
  group.timeout = std::chrono::milliseconds(assignment.timeout_milliseconds);
  group.rendezvous = std::make_shared<ActorRendezvous>(assignment.rendezvous, group.timeout);
  group.group_secret = assignment.group_secret;
  group.use_nccl = assignment.use_gpu;
  session->collectives = Collectives::Connect(group);

  const sray::internal::Invoker* loop = sray::internal::FindInvoker(assignment.function);
  if (loop == nullptr) {
    throw Error("sray: the training loop '" + assignment.function +
                "' is not registered in this process: register it with SRAY_REMOTE(" +
                assignment.function + ") in the program (every process runs the same binary)");
  }
  SetCurrentSession(session);
  (*loop)({assignment.config});
}

}  // namespace internal

c10::Device TrainContext::GetDevice() const {
  if (layout_.use_gpu) return {c10::DeviceType::CUDA, 0};
  return {c10::DeviceType::CPU};
}

const TrainContext& GetContext() { return *internal::CurrentSession().context; }

std::optional<Checkpoint> GetCheckpoint() {
  const auto& session = internal::CurrentSession();
  if (session.checkpoint_path.empty()) return std::nullopt;
  return Checkpoint::FromDirectory(session.checkpoint_path);
}

namespace {

void ReportWith(const Metrics& metrics, const Checkpoint* checkpoint) {
  internal::Session& session = internal::CurrentSession();
  for (const auto& reducer : session.reducers) {
    // Report's own collectives would pair with the other workers' buckets.
    if (reducer->Interrupted()) {
      throw Error(
          "sray: cannot report: a backward pass on this worker was interrupted by an exception and "
          "left "
          "gradient buckets half sent, so this worker is out of step with the others: end the "
          "training "
          "loop (the trainer restarts the group when max_failures allows)");
    }
    if (!reducer->HooksAttached()) {
      throw Error(
          "sray: the model's parameters were replaced after PrepareModel (torch::load, a move to another "
          "device or a cast), so steps since then were not averaged over the workers: load checkpoints and "
          "move or cast the model before PrepareModel");
    }
  }
  const auto now = std::chrono::steady_clock::now();
  const auto samples = static_cast<double>(session.samples.exchange(0));
  const int world_size = session.assignment.world_size;
  const int rank = session.assignment.world_rank;
  // A barrier, and on the way every worker's sample count summed and which
  // ranks give a checkpoint part (slot 1 + rank).
  at::Tensor counts = at::zeros({1 + world_size}, at::TensorOptions().dtype(at::kDouble));
  counts[0] = samples;
  if (checkpoint != nullptr) counts[1 + rank] = 1.0;
  counts = counts.to(GetContext().GetDevice());
  session.collectives->AllReduceSum(counts);
  const at::Tensor summed = counts.cpu();
  const double seconds = std::chrono::duration<double>(now - session.last_report).count();
  session.last_report = now;

  internal::WorkerEvent event;
  event.kind = static_cast<std::uint8_t>(internal::WorkerEventKind::kReport);
  if (checkpoint != nullptr && session.assignment.stage_checkpoints) {
    // This node sees the run directory: the part is copied there, and only
    // its name travels (no size limit, no copy in memory).
    const std::string label =
        "a" + std::to_string(session.assignment.attempt) + "-rank" + std::to_string(rank) + "-" +
        std::to_string(++session.checkpoints_staged) + "-" + std::to_string(::getpid());
    auto staged = internal::StageCheckpointDirectory(checkpoint->path(),
                                                     session.assignment.run_directory, label);
    if (!staged.ok()) {
      throw Error("sray: Report cannot copy the checkpoint into " +
                  session.assignment.run_directory + ": " + staged.status().message() +
                  ": keep the checkpoint's directory and files readable until Report returns, and "
                  "leave room for it in RunConfig::storage_path");
    }
    event.has_checkpoint = true;
    event.staged = std::move(staged).value();
  } else if (checkpoint != nullptr) {
    auto files = internal::ReadCheckpointDirectory(checkpoint->path());
    if (!files.ok()) {
      throw Error("sray: Report cannot read the checkpoint: " + files.status().message() +
                  ": keep the checkpoint's directory and files readable until Report returns");
    }
    event.has_checkpoint = true;
    event.checkpoint = std::move(files).value();
  }
  if (rank != 0) {
    // Another rank's part goes to the driver when rank 0's report names
    // it; this Report returns once the merged checkpoint is stored.
    if (checkpoint != nullptr) session.reports->Push(std::move(event));
    return;
  }
  event.metrics = metrics;
  event.seconds = seconds;
  event.samples = static_cast<std::uint64_t>(summed[0].item<double>());
  for (int other = 1; other < world_size; ++other) {
    if (summed[1 + other].item<double>() > 0.5) event.checkpoint_ranks.push_back(other);
  }
  session.reports->Push(std::move(event));
  // The pushed checkpoint is in the driver's hands now; the next restart
  // resumes from it (GetCheckpoint in this attempt still names the restored one).
}

}  // namespace

void Report(const Metrics& metrics) { ReportWith(metrics, nullptr); }
void Report(const Metrics& metrics, const Checkpoint& checkpoint) { ReportWith(metrics, &checkpoint); }

namespace internal {

void ReattachGradientHooks(Session& session) {
  for (const auto& reducer : session.reducers) reducer->Reattach();
}

void PrepareModule(const std::shared_ptr<torch::nn::Module>& module) {
  if (!module) {
    throw Error(
        "sray: PrepareModel was given an empty module: pass the model, e.g. "
        "std::make_shared<Net>()");
  }
  Session& session = CurrentSession();
  module->to(GetContext().GetDevice());
  Collectives& collectives = *session.collectives;
  std::vector<at::Tensor> parameters;
  for (const auto& parameter : module->parameters()) {
    // Tied weights appear once per module using them; average them once.
    const bool seen = std::any_of(parameters.begin(), parameters.end(), [&](const at::Tensor& other) {
      return other.unsafeGetTensorImpl() == parameter.unsafeGetTensorImpl();
    });
    if (!seen) parameters.push_back(parameter);
  }
  // Preparing the same module again changes nothing (model = PrepareModel(model)).
  const bool prepared = !parameters.empty() && std::all_of(parameters.begin(), parameters.end(), [&](const at::Tensor& parameter) {
    return session.prepared.contains(parameter.unsafeGetTensorImpl());
  });
  if (prepared) return;
  {
    // Every worker must hold the same model: rank 0's signature (element
    // count and a hash of every shape and type) against each one's own.
    std::uint64_t hash = 1469598103934665603ULL;
    std::int64_t elements = 0;
    auto mix = [&](std::int64_t value) { hash = (hash ^ static_cast<std::uint64_t>(value)) * 1099511628211ULL; };
    for (const auto& parameter : parameters) {
      elements += parameter.numel();
      mix(static_cast<std::int64_t>(parameter.scalar_type()));
      for (std::int64_t size : parameter.sizes()) mix(size);
    }
    const auto device_options = at::TensorOptions().dtype(at::kDouble).device(GetContext().GetDevice());
    const double mine[2] = {static_cast<double>(elements), static_cast<double>(hash >> 12U)};
    at::Tensor signature = at::tensor(at::ArrayRef<double>(mine, 2), at::kDouble).to(GetContext().GetDevice());
    collectives.Broadcast(signature, 0);
    const at::Tensor rank0 = signature.cpu();
    const bool same = rank0[0].item<double>() == mine[0] && rank0[1].item<double>() == mine[1];
    at::Tensor differing = at::full({1}, same ? 0.0 : 1.0, device_options);
    collectives.AllReduceSum(differing);
    if (differing.cpu().item<double>() > 0) {
      throw Error("sray: PrepareModel: the workers' models differ (rank " + std::to_string(collectives.rank()) +
                  " has " + std::to_string(elements) + " parameter elements, rank 0 " +
                  std::to_string(static_cast<std::int64_t>(rank0[0].item<double>())) +
                  ", or their shapes or types differ): build the same model on every worker");
    }
  }
  // Rank 0's parameters and buffers everywhere, one flat tensor per kind.
  std::vector<at::Tensor> state;
  for (const auto& parameter : module->parameters()) state.push_back(parameter);
  for (const auto& buffer : module->buffers()) state.push_back(buffer);
  {
    at::NoGradGuard no_grad;
    std::vector<at::Tensor> pending;
    auto flush = [&] {
      if (pending.empty()) return;
      std::vector<at::Tensor> flat_parts;
      flat_parts.reserve(pending.size());
      for (const auto& tensor : pending) flat_parts.push_back(tensor.reshape({-1}));
      at::Tensor flat = at::cat(flat_parts);
      collectives.Broadcast(flat, 0);
      std::int64_t offset = 0;
      for (auto& tensor : pending) {
        tensor.copy_(flat.narrow(0, offset, tensor.numel()).view(tensor.sizes()));
        offset += tensor.numel();
      }
      pending.clear();
    };
    for (const auto& tensor : state) {
      if (!pending.empty() && (pending.front().scalar_type() != tensor.scalar_type() ||
                               pending.front().device() != tensor.device())) {
        flush();
      }
      pending.push_back(tensor);
    }
    flush();
  }
  std::vector<at::Tensor> trainable;
  for (const auto& parameter : parameters) {
    session.prepared.insert(parameter.unsafeGetTensorImpl());
    if (parameter.requires_grad()) trainable.push_back(parameter);
  }
  // Samples/s is about training: count from here, not from the worker's start.
  session.last_report = std::chrono::steady_clock::now();
  // One worker has nothing to average with.
  if (trainable.empty() || collectives.world_size() == 1) return;
  std::vector<at::Tensor> buffers;
  if (session.assignment.broadcast_buffers) buffers = module->buffers();
  session.reducers.push_back(std::make_unique<GradientReducer>(
      std::move(trainable), collectives, session.assignment.first_bucket_bytes, session.assignment.bucket_bytes,
      std::move(buffers)));
}

}  // namespace internal
}  // namespace sray::train
