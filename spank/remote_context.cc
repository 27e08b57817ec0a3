// slurmstepd: the per-node half of a step. init_post_opt prepares the node
// (as the job user, in a child process), task_init exports the result into
// each task, exit cleans up. And slurmd's start: the sweep after steps whose
// slurmstepd died on the node.
//
// Why init_post_opt and not user_init: Slurm 22.05's slurmstepd drops its
// privileges to the job user from before user_init until its tasks are forked,
// and a PMIx peer connection it verifies in that window is refused by munge,
// which leaves the step's PMIx fence waiting forever. Staging an environment
// can take seconds, so it must not lengthen that window; init_post_opt runs
// before it, and before the PMIx plugin starts listening.

#include <pwd.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <slurm/slurm.h>  // SLURM_BATCH_SCRIPT and the other special step ids

#include "common/host_name.h"
#include "common/process_stat.h"
#include "contexts.h"
#include "crashed_steps.h"
#include "dashboard/jobs_file.h"
#include "job_user_process.h"
#include "jobsetup/hostlist.h"
#include "jobsetup/node_setup.h"
#include "jobsetup/node_setup_codec.h"
#include "jobsetup/step_processes.h"
#include "jobsetup/step_record.h"
#include "plugin_state.h"
#include "spank_status.h"
#include "step_end_sweep_gate.h"

namespace sray::spank {
namespace {

Result<std::uint32_t> GetNumber(spank_t handle, spank_item_t item, std::string_view what) {
  std::uint32_t value = 0;
  SRAY_RETURN_IF_ERROR(
      FromSpank(spank_get_item(handle, item, &value), "cannot read " + std::string(what)));
  return value;
}

Result<std::string> GetJobVariable(spank_t handle, const char* name) {
  // Node lists of a few thousand hosts compress well, but leave ample room.
  std::string buffer(std::size_t{64} * 1024, '\0');
  SRAY_RETURN_IF_ERROR(
      FromSpank(spank_getenv(handle, name, buffer.data(), static_cast<int>(buffer.size())),
                std::string("cannot read ") + name + " of the step"));
  buffer.resize(buffer.find('\0'));
  return buffer;
}

// The step's hosts in node-id order: the first runs node 0, the head.
Result<std::vector<std::string>> StepHosts(spank_t handle) {
  auto nodelist = GetJobVariable(handle, "SLURM_STEP_NODELIST");
  if (!nodelist.ok()) return nodelist.status();
  auto hosts = jobsetup::ExpandHostlist(*nodelist);
  if (!hosts.ok()) return hosts.status().WithContext("SLURM_STEP_NODELIST");
  return hosts;
}

bool IsUserStep(std::uint32_t step_id) {
  // The batch script, the extern step and salloc's interactive step are not
  // sray clusters; only the srun steps inside them are.
  return step_id != SLURM_BATCH_SCRIPT && step_id != SLURM_EXTERN_CONT &&
         step_id != SLURM_INTERACTIVE_STEP && step_id != SLURM_PENDING_STEP;
}

Result<JobUser> ReadJobUser(spank_t handle) {
  JobUser user;
  SRAY_RETURN_IF_ERROR(
      FromSpank(spank_get_item(handle, S_JOB_UID, &user.uid), "cannot read the job user"));
  SRAY_RETURN_IF_ERROR(
      FromSpank(spank_get_item(handle, S_JOB_GID, &user.gid), "cannot read the job group"));
  gid_t* groups = nullptr;
  int group_count = 0;
  SRAY_RETURN_IF_ERROR(
      FromSpank(spank_get_item(handle, S_JOB_SUPPLEMENTARY_GIDS, &groups, &group_count),
                "cannot read the job's supplementary groups"));
  if (groups != nullptr && group_count > 0) {
    user.groups.assign(groups, groups + group_count);
  }
  return user;
}

// What slurmd's start spends at most on the sweep, over every node directory
// (each step takes up to about 11 s); the next step here goes on from there.
constexpr std::chrono::seconds kDaemonStartSweepBudget{30};
// What the end of a step without a sray cluster spends at most on the sweep
// (after its tasks ended and srun returned, so it delays no user): the next
// step's end goes on from there.
constexpr std::chrono::seconds kStepEndSweepBudget{12};

// What steps whose slurmstepd died on this node left behind goes, and the
// directory where a step records itself is made. A failure costs only that
// protection, so it is logged, never fatal, with one exception: a sray step's
// own start (`starting`: SweepBeforeStepStart) is refused when an earlier run
// of its own id left what could not be removed (`refused` says why).
// Returns false when something was left to a later sweep.
struct StartingStep {
  std::string job_id;
  std::string step_id;
  std::string* refused = nullptr;
};
bool SweepCrashedSteps(
    const std::string& node_name,
    std::chrono::steady_clock::time_point give_up_at = std::chrono::steady_clock::time_point::max(),
    const std::optional<StartingStep>& starting = std::nullopt) {
  PluginState& state = State();
  auto directory = jobsetup::PrepareRecordDirectory(state.plugstack.state_directory, node_name);
  if (!directory.ok()) {
    slurm_error(
        "sray: cannot keep step records on %s: %s; what a step leaves if its slurmstepd "
        "dies here is not removed by later steps: point state_dir= in plugstack.conf at a "
        "directory only root may use (mode 0700), or remove the one named",
        node_name.c_str(), directory.status().message().c_str());
    return false;
  }
  state.record_directory = *directory;
  const CrashedStepSweep sweep =
      starting ? SweepBeforeStepStart(*directory, starting->job_id, starting->step_id, give_up_at)
               : CleanUpAfterCrashedSteps(*directory, give_up_at);
  for (const auto& step : sweep.cleaned) {
    slurm_info("sray: removed what step %s left on %s when its slurmstepd died", step.c_str(),
               node_name.c_str());
  }
  if (sweep.processes_ended > 0) {
    slurm_info("sray: ended %zu process(es) of such steps on %s", sweep.processes_ended,
               node_name.c_str());
  }
  for (const auto& problem : sweep.problems) {
    slurm_error("sray: cleaning up after a dead slurmstepd on %s: %s", node_name.c_str(),
                problem.c_str());
  }
  if (starting && starting->refused != nullptr) *starting->refused = sweep.start_refused;
  return sweep.problems.empty();
}

// As soon as the node's session directory exists, and again once the node
// is prepared: the record that lets a later step clean up should this
// slurmstepd die before the step's teardown here. True when it was written.
bool RecordStep(const jobsetup::NodeSetup& setup, const std::string& job_id,
                const std::string& step_id) {
  const PluginState& state = State();
  if (state.record_directory.empty()) return false;
  // The file's name comes from the ids root read from Slurm, never from what
  // the job user's child sent back.
  if (setup.environment.job_id != job_id || setup.environment.step_id != step_id) {
    slurm_error(
        "sray: the prepared node names step %s.%s, not %s.%s: this step is not recorded "
        "(this is a bug, please report it)",
        setup.environment.job_id.c_str(), setup.environment.step_id.c_str(), job_id.c_str(),
        step_id.c_str());
    return false;
  }
  const jobsetup::StepRecord record{.daemon_pid = ::getpid(),
                                    .daemon_start_time = ProcessStartTime(::getpid()),
                                    .uid = state.job_uid,
                                    .gid = state.job_gid,
                                    .groups = state.job_groups,
                                    .job_id = job_id,
                                    .step_id = step_id,
                                    .node_id = setup.environment.node_id,
                                    .session_directory = setup.session_directory};
  const Status written = jobsetup::WriteStepRecord(state.record_directory, record);
  if (!written.ok()) {
    slurm_error(
        "sray: cannot record step %s.%s in %s: %s; should its slurmstepd die, what it "
        "leaves is not removed by later steps: check that root can write there",
        record.job_id.c_str(), record.step_id.c_str(), state.record_directory.c_str(),
        written.message().c_str());
  }
  return written.ok();
}

Status PrepareStep(spank_t handle, std::string& node_name) {
  PluginState& state = State();
  auto step_id = GetNumber(handle, S_JOB_STEPID, "the step id");
  if (!step_id.ok()) return step_id.status();
  if (!IsUserStep(*step_id)) return Status::Ok();

  auto job_id = GetNumber(handle, S_JOB_ID, "the job id");
  if (!job_id.ok()) return job_id.status();
  auto node_id = GetNumber(handle, S_JOB_NODEID, "the node id");
  if (!node_id.ok()) return node_id.status();
  auto num_nodes = GetNumber(handle, S_JOB_NNODES, "the node count");
  if (!num_nodes.ok()) return num_nodes.status();
  auto node_cpus = GetNumber(handle, S_JOB_NCPUS, "the step's CPUs on this node");
  if (!node_cpus.ok()) return node_cpus.status();
  // Slurm gives megabytes; a job that asked for no memory gets 0 here and
  // may use the whole node.
  std::uint64_t allocated_megabytes = 0;
  (void)spank_get_item(handle, S_JOB_ALLOC_MEM, &allocated_megabytes);
  const std::uint64_t node_memory =
      allocated_megabytes > 0 ? allocated_megabytes << 20 : jobsetup::MachineMemoryBytes();
  auto user = ReadJobUser(handle);
  if (!user.ok()) return user.status();
  state.job_uid = user->uid;
  state.job_gid = user->gid;
  state.job_groups = user->groups;
  auto hosts = StepHosts(handle);
  if (!hosts.ok()) return hosts.status();
  if (*node_id < hosts->size()) node_name = (*hosts)[*node_id];
  if (!node_name.empty()) {
    std::string refused;
    SweepCrashedSteps(node_name, std::chrono::steady_clock::time_point::max(),
                      StartingStep{.job_id = std::to_string(*job_id),
                                   .step_id = std::to_string(*step_id),
                                   .refused = &refused});
    if (!refused.empty()) {
      return Status::Unavailable(
          "step " + std::to_string(*job_id) + "." + std::to_string(*step_id) +
          " cannot start here: " + refused +
          " (the slurmd log says why); ask the cluster's admins to end those processes and "
          "remove those files, or exclude this node (--exclude)");
    }
  }

  // As the job user, so a user config file is read and the session directory
  // and staged environment are created with the user's permissions, not root's.
  auto prepare = [&](const TellCaller& tell) -> Result<jobsetup::NodeSetup> {
    auto options = jobsetup::ResolveOptions(
        {.admin_config = state.plugstack.admin_config, .option_list = state.option_list});
    if (!options.ok()) return options.status();
    return jobsetup::PrepareNode(
        {.job_id = std::to_string(*job_id),
         .step_id = std::to_string(*step_id),
         .node_id = *node_id,
         .num_nodes = *num_nodes,
         .node_cpus = *node_cpus,
         .node_memory_bytes = node_memory,
         .head_host = hosts->front(),
         .uid = state.job_uid,
         .options = std::move(options).value(),
         .session_directory_per_node = false,
         // One node per machine on a real cluster; where emulated nodes
         // share one, each rank still checks the shares.
         .nodes_on_this_machine = 1,
         .task_variable =
             [handle](const std::string& name) {
               char value[8192];
               if (spank_getenv(handle, name.c_str(), value, sizeof(value)) != ESPANK_SUCCESS) {
                 return std::optional<std::string>();
               }
               return std::optional<std::string>(value);
             },
         // Staging runs in slurmstepd: its progress goes to the
         // node's slurmd log; the dashboard shows the outcome.
         .progress =
             [node = *node_id](const std::string& line) {
               slurm_info("sray: node %u: %s", node, line.c_str());
             },
         // scancel ends the staging process with the rest of the step
         // (the conda tool gets default signal handling, envs/create.cc).
         .interrupted = {},
         // Told to slurmstepd as soon as the session directory exists, so
         // that the step is recorded while its environment is staged (which
         // can take minutes): a slurmstepd that dies meanwhile then leaves
         // a record for the sweep, not an unknown directory.
         .created =
             [&tell](const jobsetup::NodeSetup& created) {
               tell(jobsetup::EncodeNodeSetupResult(created));
             }});
  };
  const std::string job = std::to_string(*job_id);
  const std::string step = std::to_string(*step_id);
  bool recorded = false;
  std::filesystem::path early_session;
  auto answer = RunAsJobUser(
      *user, [&](const TellCaller& tell) { return jobsetup::EncodeNodeSetupResult(prepare(tell)); },
      std::nullopt,
      [&](const std::string& told) {
        auto created = jobsetup::DecodeNodeSetupResult(told);
        if (!created.ok()) return;
        early_session = created->session_directory;
        recorded = RecordStep(*created, job, step) || recorded;
      });
  auto setup = answer.ok() ? jobsetup::DecodeNodeSetupResult(*answer)
                           : Result<jobsetup::NodeSetup>(answer.status());
  if (!setup.ok()) {
    // PrepareNode removes what it made when it fails; the record goes once
    // the session directory has (a child that died, or a removal that
    // failed, leaves it to the record's sweep after this slurmstepd ends).
    if (recorded && !state.record_directory.empty() && !early_session.empty()) {
      std::error_code error;
      if (!std::filesystem::exists(early_session, error) && !error)
        (void)jobsetup::RemoveStepRecord(state.record_directory, job, step);
    }
    return setup.status();
  }
  state.node_setup = std::move(setup).value();
  RecordStep(*state.node_setup, job, step);
  return Status::Ok();
}

}  // namespace

Status PrepareStepOnNode(spank_t handle) {
  PluginState& state = State();
  if (!state.cluster_requested) return Status::Ok();
  std::string node_name;
  Status status = PrepareStep(handle, node_name);
  if (!status.ok()) {
    std::string where = "on " + (node_name.empty() ? HostName("unknown host") : node_name);
    std::uint32_t node_id = 0;
    if (spank_get_item(handle, S_JOB_NODEID, &node_id) == ESPANK_SUCCESS) {
      where += " (node " + std::to_string(node_id) + ")";
    }
    // Here the message would reach only the slurmd log; task_init writes it to
    // the task's stderr, which the user sees, and fails the task.
    state.deferred_error = status.WithContext("cannot start the sray cluster " + where);
  }
  return Status::Ok();
}

namespace {

// Staging ran in slurmstepd before the step's output was connected, so its
// live lines went to the slurmd log. Here, in the node's first task, whose
// stderr is the job's, the outcome is said once: only where the environment
// was staged or made now (minutes, at times), not where a copy was reused.
void TellStagingOutcome(spank_t handle, const jobsetup::NodeSetup& setup) {
  int local_task = -1;  // spank.h: S_TASK_ID is an int*
  if (spank_get_item(handle, S_TASK_ID, &local_task) != ESPANK_SUCCESS || local_task != 0) return;
  std::ifstream file(setup.session_directory / jobsetup::kEnvironmentNoteFile);
  std::string note;
  if (!std::getline(file, note)) return;
  if (!note.starts_with("staged ") && !note.starts_with("made ")) return;
  std::fprintf(stderr, "sray: node %u: %s\n", setup.environment.node_id, note.c_str());
  std::fflush(stderr);
}

}  // namespace

Status ExportTaskEnvironment(spank_t handle) {
  const PluginState& state = State();
  if (!state.cluster_requested) return Status::Ok();
  SRAY_RETURN_IF_ERROR(state.deferred_error);
  if (!state.node_setup) return Status::Ok();
  TellStagingOutcome(handle, *state.node_setup);
  for (const auto& [name, value] :
       jobsetup::ToEnvironmentVariables(state.node_setup->environment)) {
    SRAY_RETURN_IF_ERROR(FromSpank(spank_setenv(handle, name.c_str(), value.c_str(), 1),
                                   "cannot export " + name + " to the task"));
  }
  for (const auto& name : state.node_setup->environment.unset_variables) {
    (void)spank_unsetenv(handle, name.c_str());
  }
  for (const auto& [name, value] :
       jobsetup::TransportEnvironmentDefaults(state.node_setup->environment)) {
    // Never overwrite: the user's own UCX settings win.
    const spank_err_t set = spank_setenv(handle, name.c_str(), value.c_str(), 0);
    if (set != ESPANK_SUCCESS && set != ESPANK_ENV_EXISTS) {
      return FromSpank(set, "cannot export " + name + " to the task");
    }
  }
  return Status::Ok();
}

Status EndLeftovers() {
  const PluginState& state = State();
  const jobsetup::StepProcessSelector selector{
      .uid = state.job_uid,
      .session_directory = state.node_setup->session_directory,
      .node_id = state.node_setup->environment.node_id};
  auto ended = jobsetup::EndStepProcesses(selector, jobsetup::kLeftoverGrace);
  if (!ended.ok()) return ended.status();
  if (*ended > 0) {
    slurm_info("sray: ended %zu leftover process(es) of step %s.%s on node %u", *ended,
               state.node_setup->environment.job_id.c_str(),
               state.node_setup->environment.step_id.c_str(), selector.node_id);
  }
  return Status::Ok();
}

Status EndLeftoversAfterLastTask(spank_t handle) {
  PluginState& state = State();
  if (!state.node_setup) return Status::Ok();
  auto local_tasks = GetNumber(handle, S_JOB_LOCAL_TASK_COUNT, "the node's task count");
  if (!local_tasks.ok()) return local_tasks.status();
  // Waiting for the last task matters: an earlier task's orphans may be
  // serving the tasks still running.
  if (++state.exited_tasks < *local_tasks) return Status::Ok();
  return EndLeftovers();
}

namespace {

// This step's node name, as its sray steps record it (the step's node list
// at this node's index); empty where this is not a user step.
Result<std::string> UserStepNodeName(spank_t handle) {
  auto step_id = GetNumber(handle, S_JOB_STEPID, "the step id");
  if (!step_id.ok()) return step_id.status();
  if (!IsUserStep(*step_id)) return std::string();
  auto node_id = GetNumber(handle, S_JOB_NODEID, "the node id");
  if (!node_id.ok()) return node_id.status();
  auto hosts = StepHosts(handle);
  if (!hosts.ok()) return hosts.status();
  if (*node_id >= hosts->size()) {
    return Status::InvalidArgument("node id " + std::to_string(*node_id) +
                                   " is beyond SLURM_STEP_NODELIST");
  }
  return (*hosts)[*node_id];
}

Status CleanUpStepOnNode() {
  const PluginState& state = State();
  Status leftovers = EndLeftovers();
  // Removing a user-owned tree as root invites symlink tricks: the job user
  // removes it.
  const JobUser user{.uid = state.job_uid, .gid = state.job_gid, .groups = state.job_groups};
  auto removed = RunAsJobUser(user, [&state] {
    const jobsetup::TaskEnvironment& environment = state.node_setup->environment;
    if (environment.node_id == 0) {
      // The driver removes its jobs file as it ends; one killed (kill -9, a
      // node's OOM killer) leaves it, and `sray status` would list a dead
      // job. The home is the user's own, not slurmstepd's $HOME.
      if (const passwd* entry = ::getpwuid(::getuid()); entry != nullptr && entry->pw_dir) {
        dashboard::RemoveJobsFile(entry->pw_dir, environment.job_id, environment.step_id);
      }
      // And where the driver's own $HOME put it.
      dashboard::RemoveNotedJobsFile(state.node_setup->session_directory, environment.job_id,
                                     environment.step_id);
    }
    const Status status = jobsetup::TeardownNode(*state.node_setup);
    return status.ok() ? std::string() : status.message();
  });
  if (!removed.ok()) return removed.status().WithContext("cannot remove the session directory");
  if (!removed->empty()) {
    return Status::IoError(*removed + ": remove " + state.node_setup->session_directory.string() +
                           " by hand (as the job user)");
  }
  // Kept when anything above failed: the next step here tries again.
  if (leftovers.ok() && !state.record_directory.empty()) {
    const jobsetup::TaskEnvironment& environment = state.node_setup->environment;
    // A record left here only costs the next step a look: logged, not fatal.
    const Status forgotten =
        jobsetup::RemoveStepRecord(state.record_directory, environment.job_id, environment.step_id);
    if (!forgotten.ok()) slurm_error("sray: %s", forgotten.message().c_str());
  }
  return leftovers;
}

}  // namespace

Status EndStepOnNode(spank_t handle) {
  if (State().node_setup) return CleanUpStepOnNode();
  // A step without a sray cluster (of this job or any other): nothing of its
  // own to remove, and nothing it could fail. Most nodes have no record to
  // sweep, which costs a directory listing; the sweep runs before Slurm
  // reports the step complete, so a step's end waits for it.
  auto node_name = UserStepNodeName(handle);
  if (!node_name.ok()) {
    slurm_debug("sray: no sweep after crashed steps at this step's end: %s",
                node_name.status().message().c_str());
    return Status::Ok();
  }
  if (node_name->empty()) return Status::Ok();
  auto directory = jobsetup::PrepareRecordDirectory(State().plugstack.state_directory, *node_name);
  if (!directory.ok()) return Status::Ok();  // said at each sray step's start
  // StepEndSweepGate says why not always.
  auto gate = StepEndSweepGate::Enter(*directory);
  if (!gate) return Status::Ok();
  const bool clean =
      SweepCrashedSteps(*node_name, std::chrono::steady_clock::now() + kStepEndSweepBudget);
  gate->Record(!clean);
  return Status::Ok();
}

Status SweepCrashedStepsAtDaemonStart(std::span<const std::string_view> arguments) {
  auto parsed = ParsePlugstackArguments(arguments);
  if (!parsed.ok()) return parsed.status();
  State().plugstack = std::move(parsed).value();
  // Every node's directory: state_dir is node-local, so they are all this
  // machine's (more than one where nodes are emulated, or the node's name
  // changed), and a record's daemon is looked up on this machine. An entry
  // that cannot be read is skipped, not the walk.
  const std::filesystem::path& state = State().plugstack.state_directory;
  std::error_code error;
  std::filesystem::directory_iterator entry(state, error);
  if (error) {
    if (error == std::errc::no_such_file_or_directory) return Status::Ok();
    return Status::IoError("cannot list " + state.string() + ": " + error.message());
  }
  std::vector<std::string> nodes;
  for (; entry != std::filesystem::directory_iterator(); entry.increment(error)) {
    if (error) break;
    std::error_code kind;
    if (entry->is_directory(kind) && !entry->is_symlink(kind))
      nodes.push_back(entry->path().filename().string());
  }
  const auto give_up_at = std::chrono::steady_clock::now() + kDaemonStartSweepBudget;
  for (const std::string& node : nodes) SweepCrashedSteps(node, give_up_at);
  return Status::Ok();
}

}  // namespace sray::spank
