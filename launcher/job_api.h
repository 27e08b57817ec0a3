#pragma once

// What `sray status` and `sray logs` share: choosing one of the user's
// running jobs from their jobs files, talking to its dashboard API with the
// token, and, where the head's loopback is out of reach, running the same
// command on the head node through Slurm.

#include <optional>
#include <string>
#include <vector>

#include <httplib.h>

#include "dashboard/jobs_file.h"

namespace sray::launcher {

std::string JobLabel(const dashboard::JobsFileContent& job);

// What a command that names no job does when several run: `sray status`
// lists them as its answer (standard output, status 0); a command that acts
// on one job (login, logs) cannot pick, so it fails with the list on
// standard error (its output may be captured as a link or a log).
enum class SeveralJobs { kListAsAnswer, kAskForOne };

// `wanted` (JOB or JOB.STEP, empty: the only one), or nullopt once it has
// said why; then `exit_code` is what the command returns.
std::optional<dashboard::JobsFileContent> ChooseJob(const std::string& wanted,
                                                    const std::string& command, int& exit_code,
                                                    SeveralJobs several = SeveralJobs::kAskForOne);

// ChooseJob, then, where the job's dashboard listens on another host's
// loopback, runs `sray COMMAND JOB` there through srun (HopToHead; returns
// only if it cannot) unless `on_head`; nullopt once it has said why, with
// `exit_code` set. The one preamble of commands that take only a job.
std::optional<dashboard::JobsFileContent> ChooseReachableJob(
    const std::string& wanted, const std::string& command, bool on_head, int& exit_code,
    SeveralJobs several = SeveralJobs::kAskForOne);

class JobApi {
 public:
  explicit JobApi(const dashboard::JobsFileContent& job);
  httplib::Result Get(const std::string& path);
  httplib::Result Post(const std::string& path);

 private:
  httplib::Client client_;
  httplib::Headers headers_;
};

// Off the head node: execs `srun --jobid=J --overlap -N1 -n1 -w HEAD sray
// COMMAND --on-head ARGUMENTS...`; returns only when it cannot.
void HopToHead(const dashboard::JobsFileContent& job, const std::string& command,
               const std::vector<std::string>& arguments);

// A dashboard's error text without its own "sray: " (the command adds its
// own) and trailing newline.
std::string ServerSays(const std::string& body);

// The base address (no trailing '/') to reach the job's dashboard at from
// this machine: on the head its local_url, which needs no lookup of the
// head's own name (the url names it, for other machines). A wildcard host (a dashboard=0.0.0.0:P
// job's file, written by a driver before DashboardUrl named the head) is the head: sent as it was,
// the token went to this machine's port P, whoever listened there.
std::string DashboardBaseUrl(const dashboard::JobsFileContent& job);

// True when the job's dashboard listens on its head node's loopback and
// this is not that node: the token must not go to this machine's port of
// that number (someone else's server may listen there).
bool DashboardIsElsewhere(const dashboard::JobsFileContent& job);

// "cannot reach ...: run it on the head node ..." for `command`.
std::string UnreachableMessage(const dashboard::JobsFileContent& job, const std::string& command,
                               const std::string& why);

}  // namespace sray::launcher
