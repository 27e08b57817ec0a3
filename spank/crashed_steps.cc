#include "crashed_steps.h"

#include <chrono>
#include <optional>
#include <system_error>

#include "job_user_process.h"
#include "jobsetup/node_setup.h"
#include "jobsetup/step_processes.h"
#include "jobsetup/step_record.h"
#include "step_end_sweep_gate.h"

namespace sray::spank {
namespace {

// A stale record's user could stop the child that removes its files, or
// its tmpdir could hang: the next step here, maybe another user's, waits no
// longer than this for one step's files.
constexpr std::chrono::seconds kRemovalDeadline{10};
// The longest a sweep at a step's end runs: its budget (12 s) and the
// step it began last (processes' grace and kRemovalDeadline).
constexpr std::chrono::seconds kLongestEndSweep{25};

// Ends the step's processes and removes its files; OK once nothing is left.
Status CleanUpStep(const jobsetup::StepRecord& record, std::size_t& processes_ended) {
  auto ended = jobsetup::EndStepProcesses(
      {.uid = record.uid, .session_directory = record.session_directory, .node_id = record.node_id},
      jobsetup::kLeftoverGrace);
  if (!ended.ok()) return ended.status();
  processes_ended += *ended;
  jobsetup::NodeSetup setup;
  setup.session_directory = record.session_directory;
  setup.environment.job_id = record.job_id;
  setup.environment.step_id = record.step_id;
  setup.environment.node_id = record.node_id;
  // Root ended the processes (their uid came from Slurm); the files go as
  // the step's user, as at a normal step end: root removing a user-owned
  // tree invites symbolic-link tricks.
  auto removed = RunAsJobUser(
      {.uid = record.uid, .gid = record.gid, .groups = record.groups},
      [&setup] {
        const Status status = jobsetup::TeardownNode(setup);
        return status.ok() ? std::string() : status.message();
      },
      kRemovalDeadline);
  if (!removed.ok()) return removed.status();
  if (!removed->empty()) return Status::IoError(*removed);
  return Status::Ok();
}

// The record in `file` now, if it is still one whose daemon is gone.
std::optional<jobsetup::StepRecord> StillStale(const std::filesystem::path& file) {
  auto current = jobsetup::ReadStepRecord(file);
  if (!current.ok() || jobsetup::DaemonRuns(*current)) return std::nullopt;
  return std::move(current).value();
}

}  // namespace

CrashedStepSweep CleanUpAfterCrashedSteps(const std::filesystem::path& record_directory,
                                          std::chrono::steady_clock::time_point give_up_at) {
  CrashedStepSweep sweep;
  auto stale = jobsetup::FindStaleStepRecords(record_directory);
  if (!stale.ok()) {
    sweep.problems.push_back(stale.status().message());
    return sweep;
  }
  for (auto& [file, record] : *stale) {
    if (std::chrono::steady_clock::now() >= give_up_at) {
      sweep.problems.push_back("stopped before " + file.filename().string() +
                               " after the time allowed; the next step that ends here goes on");
      break;
    }
    std::error_code error;
    if (!record.ok()) {
      // Nothing to act on, and it would be reported at every step: dropped.
      std::filesystem::remove(file, error);
      sweep.problems.push_back("dropped " + file.string() + ": " + record.status().message());
      continue;
    }
    // Read again: a step of the same id may have started here since the
    // look above (a job Slurm requeued keeps its id), and its live daemon's
    // record wins; a newer dead one is what is cleaned.
    const auto current = StillStale(file);
    if (!current) continue;
    const std::string step = current->job_id + "." + current->step_id + " (node " +
                             std::to_string(current->node_id) + ")";
    const Status cleaned = CleanUpStep(*current, sweep.processes_ended);
    if (!cleaned.ok()) {
      sweep.problems.push_back("step " + step +
                               " left by a slurmstepd that died: " + cleaned.message() +
                               "; tried again when the next step here starts or ends");
      continue;
    }
    if (!StillStale(file)) continue;
    std::filesystem::remove(file, error);
    if (error) {
      sweep.problems.push_back("cannot remove " + file.string() + ": " + error.message() +
                               ": the next step here tries again; remove it by hand if it stays");
    }
    sweep.cleaned.push_back(step);
  }
  return sweep;
}

CrashedStepSweep SweepBeforeStepStart(const std::filesystem::path& record_directory,
                                      std::string_view job_id, std::string_view step_id,
                                      std::chrono::steady_clock::time_point give_up_at) {
  const auto gate =
      StepEndSweepGate::Hold(record_directory, std::chrono::steady_clock::now() + kLongestEndSweep);
  CrashedStepSweep sweep = CleanUpAfterCrashedSteps(record_directory, give_up_at);
  if (!gate) {
    sweep.problems.push_back(
        "another sweep here held the node's sweep lock for more than " +
        std::to_string(kLongestEndSweep.count()) +
        " s, or the lock could not be opened; this step's start went on without it (a hung "
        "tmpdir or an unkillable process: see the node's slurmd log)");
  }
  const auto own = StillStale(record_directory / jobsetup::StepRecordName(job_id, step_id));
  if (!own) return sweep;
  std::error_code error;
  const bool files_left = std::filesystem::exists(own->session_directory, error) || error;
  const bool processes_left =
      !jobsetup::FindStepProcesses(
           {.uid = own->uid, .session_directory = own->session_directory, .node_id = own->node_id})
           .empty();
  if (files_left || processes_left) {
    sweep.start_refused = "what its earlier run (a job Slurm requeued keeps its id) left here (" +
                          std::string(files_left ? own->session_directory.string() : "") +
                          (files_left && processes_left ? " and " : "") +
                          (processes_left ? "processes" : "") + ") could not be removed";
    return sweep;
  }
  // Only the record stayed (its removal failed above): nothing of that run
  // is left for this step to share, and this step's record replaces it.
  (void)jobsetup::RemoveStepRecord(record_directory, job_id, step_id);
  return sweep;
}

}  // namespace sray::spank
