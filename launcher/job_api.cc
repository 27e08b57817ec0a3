#include "job_api.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <optional>

#include "common/executable_search.h"
#include "common/host_name.h"
#include "dashboard/dashboard_address.h"
#include "slurm_job_state.h"

namespace sray::launcher {
namespace {

// The jobs files whose driver is known to be gone: on this host, no such
// process; on another, Slurm says the job has ended (its head node may have
// crashed, and nothing ran there to remove the file). One squeue for every
// job on another host, and `scontrol show config` only when some job there
// ended and names a cluster. Such files are removed: they are this user's,
// and nothing will ever answer at their address.
std::vector<dashboard::JobsFileContent> DriversAlive(std::vector<dashboard::JobsFileContent> jobs,
                                                     const std::filesystem::path& home) {
  const std::string here = HostName();
  std::vector<std::string> elsewhere;
  for (const auto& job : jobs) {
    if (job.head_hostname != here) elsewhere.push_back(job.job_id);
  }
  const auto states =
      elsewhere.empty() ? std::map<std::string, SlurmJobState>{} : AskSlurmAbout(elsewhere);
  std::optional<std::string> local_cluster;
  std::vector<dashboard::JobsFileContent> alive;
  for (auto& job : jobs) {
    bool gone = false;
    if (job.head_hostname == here) {
      gone = job.pid > 0 && ::kill(static_cast<pid_t>(job.pid), 0) != 0 && errno != EPERM;
    } else if (states.at(job.job_id) == SlurmJobState::kEnded) {
      // A home shared by several clusters: this controller's "ended" may be
      // about another cluster's job of the same number.
      if (!job.cluster.empty() && !local_cluster) local_cluster = LocalSlurmClusterName();
      gone = job.cluster.empty() || job.cluster == *local_cluster;
    }
    if (gone) {
      dashboard::RemoveJobsFile(home, job.job_id, job.step_id);
    } else {
      alive.push_back(std::move(job));
    }
  }
  return alive;
}

}  // namespace

std::string JobLabel(const dashboard::JobsFileContent& job) {
  return job.job_id + "." + job.step_id;
}

std::optional<dashboard::JobsFileContent> ChooseJob(const std::string& wanted,
                                                    const std::string& command, int& exit_code,
                                                    SeveralJobs several) {
  const auto home = dashboard::UserHome();
  auto listed = dashboard::ListJobs(home);
  // A named job: only its own files are checked (a job on another host
  // costs a question to Slurm); the others only when it is not running.
  if (!wanted.empty()) {
    std::vector<dashboard::JobsFileContent> named;
    std::vector<dashboard::JobsFileContent> others;
    for (auto& job : listed) {
      (JobLabel(job) == wanted || job.job_id == wanted ? named : others).push_back(std::move(job));
    }
    auto alive = DriversAlive(std::move(named), home);
    if (!alive.empty()) return std::move(alive.front());
    // Checked once: the named job's files are not asked about again below.
    listed = std::move(others);
  }
  std::vector<dashboard::JobsFileContent> running = DriversAlive(std::move(listed), home);
  if (running.empty()) {
    std::cerr << "sray: " << command << ": no running sray job of this user (nothing in "
              << dashboard::JobsDirectory(home).string()
              << "): start one with `sray run` or `srun --ray-cluster`\n";
    exit_code = 1;
    return std::nullopt;
  }
  for (const auto& job : running) {
    if (wanted.empty() ? running.size() == 1 : (JobLabel(job) == wanted || job.job_id == wanted)) {
      return job;
    }
  }
  const bool answer = wanted.empty() && several == SeveralJobs::kListAsAnswer;
  std::ostream& out = answer ? std::cout : std::cerr;
  if (answer) {
    out << "several sray jobs are running; give one: sray " << command << " JOB\n";
  } else if (wanted.empty()) {
    out << "sray: " << command
        << ": several sray jobs are running, and no job was named: name one, "
        << "sray " << command << " JOB, from these:\n";
  } else {
    out << "sray: " << command << ": no running job " << wanted << "; running:\n";
  }
  for (const auto& job : running) {
    out << "  " << std::left << std::setw(28) << JobLabel(job) << " head " << job.head_hostname
        << "  " << job.url << "\n";
  }
  exit_code = answer ? 0 : 1;
  return std::nullopt;
}

std::optional<dashboard::JobsFileContent> ChooseReachableJob(const std::string& wanted,
                                                             const std::string& command,
                                                             bool on_head, int& exit_code,
                                                             SeveralJobs several) {
  auto chosen = ChooseJob(wanted, command, exit_code, several);
  if (!chosen || !DashboardIsElsewhere(*chosen)) return chosen;
  if (!on_head) HopToHead(*chosen, command, {JobLabel(*chosen)});
  std::cerr << UnreachableMessage(*chosen, command,
                                  "it listens on the loopback of " + chosen->head_hostname +
                                      ", and srun could not take this command there");
  exit_code = 1;
  return std::nullopt;
}

std::string DashboardBaseUrl(const dashboard::JobsFileContent& job) {
  const bool here = job.head_hostname == HostName();
  std::string base = here && !job.local_url.empty() ? job.local_url : job.url;
  if (base.ends_with('/')) base.pop_back();
  const auto address = dashboard::ParseDashboardUrl(base);
  if (!address || !dashboard::IsWildcardHost(address->host)) return base;
  const std::string head = here ? "127.0.0.1" : job.head_hostname;
  return "http://" + head + ":" + std::to_string(address->port);
}

JobApi::JobApi(const dashboard::JobsFileContent& job)
    : client_(DashboardBaseUrl(job)), headers_({{"Authorization", "Bearer " + job.token}}) {
  client_.set_connection_timeout(3);
  client_.set_read_timeout(15);
}

httplib::Result JobApi::Get(const std::string& path) {
  return client_.Get(path, headers_);
}

httplib::Result JobApi::Post(const std::string& path) {
  return client_.Post(path, headers_, "", "text/plain");
}

void HopToHead(const dashboard::JobsFileContent& job, const std::string& command,
               const std::vector<std::string>& arguments) {
  if (job.head_hostname == HostName()) return;
  const char* path = std::getenv("PATH");
  const auto srun = FindExecutableOnPath("srun", path != nullptr ? path : "/usr/bin:/bin");
  if (!srun) return;
  std::error_code error;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe", error).string();
  if (error) return;
  std::vector<std::string> words = {
      srun->string(), "--jobid=" + job.job_id, "--overlap", "-N1",   "-n1",
      "-w",           job.head_hostname,       self,        command, "--on-head"};
  words.insert(words.end(), arguments.begin(), arguments.end());
  std::vector<char*> argv;
  for (auto& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  ::execv(argv[0], argv.data());
}

std::string ServerSays(const std::string& body) {
  std::string text = body.starts_with("sray: ") ? body.substr(6) : body;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

bool DashboardIsElsewhere(const dashboard::JobsFileContent& job) {
  const auto address = dashboard::ParseDashboardUrl(job.url);
  return address && dashboard::IsLoopbackHost(address->host) && job.head_hostname != HostName();
}

std::string UnreachableMessage(const dashboard::JobsFileContent& job, const std::string& command,
                               const std::string& why) {
  const std::string start = "sray: " + command + ": cannot reach the dashboard of job " +
                            JobLabel(job) + " at " + job.url + " (" + why + "): ";
  // A `sray run` job has no Slurm job to step into.
  if (job.job_id.starts_with("local")) {
    return start + "the job runs on this machine under `sray run`; if it is still starting, try " +
           "again, and if its launcher was killed, end the job's processes (its driver is pid " +
           std::to_string(job.pid) + ")\n";
  }
  return start + "run `sray " + command + "` on its head node " + job.head_hostname +
         ", or inside the job (srun --jobid=" + job.job_id + " --overlap -w " + job.head_hostname +
         " sray " + command + ")\n";
}

}  // namespace sray::launcher
