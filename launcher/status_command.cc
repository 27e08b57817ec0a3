#include "status_command.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "common/executable_search.h"
#include "common/host_name.h"
#include "dashboard/jobs_file.h"

namespace sray::launcher {
namespace {

struct StatusArguments {
  std::string job;       // JOB or JOB.STEP; empty: the only one
  bool on_head = false;  // set by the hop: do not hop again
};

std::string Label(const dashboard::JobsFileContent& job) {
  return job.job_id + "." + job.step_id;
}

// False when the driver is known to be gone (same host, no such process).
bool DriverAlive(const dashboard::JobsFileContent& job) {
  if (job.head_hostname != HostName() || job.pid <= 0) return true;
  return ::kill(static_cast<pid_t>(job.pid), 0) == 0 || errno == EPERM;
}

std::string Mib(double bytes) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(1) << bytes / (1024.0 * 1024.0);
  return text.str();
}

std::string Pair(const nlohmann::json& node, const std::string& resource) {
  const auto& total = node["resources_total"];
  if (!total.contains(resource)) return "-";
  std::ostringstream text;
  text << node["resources_available"].value(resource, 0.0) << "/" << total[resource].get<double>();
  return text.str();
}

void PrintNodes(const nlohmann::json& cluster) {
  std::cout << std::left << std::setw(6) << "node" << std::setw(14) << "host" << std::setw(10)
            << "CPU free" << std::setw(10) << "GPU free" << std::setw(8) << "queued" << std::setw(9)
            << "workers" << std::setw(26) << "store used/capacity MiB"
            << "spilled MiB\n";
  for (const auto& node : cluster["nodes"]) {
    std::cout << std::left << std::setw(6) << node["node_id"].get<int>();
    if (node.contains("error")) {
      std::cout << "no answer: " << node["error"].get<std::string>() << "\n";
      continue;
    }
    const auto& store = node["object_store"];
    std::cout << std::setw(14) << node["hostname"].get<std::string>() << std::setw(10)
              << Pair(node, "CPU") << std::setw(10) << Pair(node, "GPU") << std::setw(8)
              << node["queued_tasks"].get<std::uint64_t>() << std::setw(9)
              << node["worker_processes"].get<std::uint64_t>() << std::setw(26)
              << Mib(store["in_memory_bytes"].get<double>()) + "/" +
                     Mib(store["capacity_bytes"].get<double>())
              << Mib(store["spilled_bytes"].get<double>()) << "\n";
  }
}

void PrintTraining(const nlohmann::json& training) {
  const auto& runs = training["runs"];
  if (runs.empty()) return;
  std::cout << "training runs:\n";
  for (const auto& run : runs) {
    const auto& points = run["points"];
    std::cout << "  " << run["name"].get<std::string>() << ": " << run["state"].get<std::string>()
              << ", " << run["num_workers"].get<int>() << " workers, " << run["restarts"].get<int>()
              << " restart(s), " << points.size() << " reports";
    if (!points.empty()) {
      std::cout << "; last:";
      for (const auto& [name, value] : points.back()["metrics"].items()) {
        std::cout << " " << name << "=" << value.get<double>();
      }
    }
    std::cout << "\n";
  }
}

// Execs `srun --jobid=J --overlap -w HEAD sray status --on-head JOB`; returns only on failure.
int HopToHead(const dashboard::JobsFileContent& job) {
  const char* path = std::getenv("PATH");
  const auto srun = FindExecutableOnPath("srun", path != nullptr ? path : "/usr/bin:/bin");
  if (!srun) return -1;
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string jobid = "--jobid=" + job.job_id;
  const std::string label = Label(job);
  const std::string srun_path = srun->string();
  std::vector<const char*> command = {
      srun_path.c_str(),         jobid.c_str(), "--overlap", "-N1",       "-n1",         "-w",
      job.head_hostname.c_str(), self.c_str(),  "status",    "--on-head", label.c_str(), nullptr};
  ::execv(srun_path.c_str(), const_cast<char* const*>(command.data()));
  return -1;
}

int Status(const StatusArguments& arguments) {
  const auto home = dashboard::UserHome();
  std::vector<dashboard::JobsFileContent> running;
  for (auto& job : dashboard::ListJobs(home)) {
    if (DriverAlive(job)) running.push_back(std::move(job));
  }
  if (running.empty()) {
    std::cerr << "sray: status: no running sray job of this user (nothing in "
              << (home / ".sray/jobs").string()
              << "): start one with `sray run` or `srun --ray-cluster`\n";
    return 1;
  }
  const dashboard::JobsFileContent* chosen = nullptr;
  for (const auto& job : running) {
    if (arguments.job.empty() ? running.size() == 1
                              : (Label(job) == arguments.job || job.job_id == arguments.job)) {
      chosen = &job;
      break;
    }
  }
  if (chosen == nullptr) {
    std::cout << (arguments.job.empty()
                      ? "several sray jobs are running; give one: sray status JOB"
                      : "sray: status: no running job " + arguments.job + "; running:")
              << "\n";
    for (const auto& job : running) {
      std::cout << "  " << std::left << std::setw(28) << Label(job) << " head " << job.head_hostname
                << "  " << job.url << "\n";
    }
    return arguments.job.empty() ? 0 : 1;
  }
  httplib::Client client(chosen->url.substr(0, chosen->url.size() - 1));
  client.set_connection_timeout(3);
  client.set_read_timeout(15);
  const httplib::Headers headers = {{"Authorization", "Bearer " + chosen->token}};
  auto nodes = client.Get("/api/nodes", headers);
  if (!nodes) {
    if (!arguments.on_head && chosen->head_hostname != HostName()) HopToHead(*chosen);
    std::cerr << "sray: status: cannot reach the dashboard of job " << Label(*chosen) << " at "
              << chosen->url << " (" << httplib::to_string(nodes.error())
              << "): run `sray status` on its head node " << chosen->head_hostname
              << ", or inside the job (srun --jobid=" << chosen->job_id << " --overlap -w "
              << chosen->head_hostname << " sray status)\n";
    return 1;
  }
  if (nodes->status != 200) {
    std::cerr << "sray: status: the dashboard of job " << Label(*chosen) << " answered "
              << nodes->status << ": " << nodes->body;
    return 1;
  }
  std::cout << "job " << Label(*chosen) << "  dashboard " << chosen->url << "  head "
            << chosen->head_hostname << "\n";
  PrintNodes(nlohmann::json::parse(nodes->body));
  if (auto training = client.Get("/api/training", headers); training && training->status == 200) {
    PrintTraining(nlohmann::json::parse(training->body));
  }
  return 0;
}

}  // namespace

void AddStatusCommand(CLI::App& app) {
  auto arguments = std::make_shared<StatusArguments>();
  auto* status = app.add_subcommand(
      "status", "Show this user's running sray jobs, or one job's nodes and training runs");
  status->add_option("job", arguments->job, "JOB or JOB.STEP (default: the only running one)");
  status->add_flag("--on-head", arguments->on_head, "run on the head node already (no hop)")
      ->group("");
  status->callback([arguments] { throw CLI::RuntimeError(Status(*arguments)); });
}

}  // namespace sray::launcher
