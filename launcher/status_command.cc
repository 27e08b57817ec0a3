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

#include "job_api.h"

namespace sray::launcher {
namespace {

struct StatusArguments {
  std::string job;       // JOB or JOB.STEP; empty: the only one
  bool on_head = false;  // set by the hop: do not hop again
};

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
            << "workers" << std::setw(26) << "store used/capacity MiB" << std::setw(13)
            << "spilled MiB" << std::setw(7) << "load"
            << "sray MiB\n";
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
              << std::setw(13) << Mib(store["spilled_bytes"].get<double>());
    // The machine's 1-minute load average (-1: unknown) and what sray's
    // processes hold resident on the node.
    const auto load = node.value("load", nlohmann::json::object());
    const double average = load.value("load_average_1m", -1.0);
    std::ostringstream shown;
    if (average >= 0) shown << std::fixed << std::setprecision(2) << average;
    std::cout << std::setw(7) << (average >= 0 ? shown.str() : "-")
              << Mib(load.value("sray_resident_bytes", 0.0)) << "\n";
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
        // A diverged run reports NaN or inf, which JSON carries as null.
        std::cout << " " << name << "=";
        if (value.is_number()) {
          std::cout << value.get<double>();
        } else {
          std::cout << "nan";
        }
      }
    }
    std::cout << "\n";
  }
}

int Status(const StatusArguments& arguments) {
  int exit_code = 0;
  const auto chosen = ChooseReachableJob(arguments.job, "status", arguments.on_head, exit_code,
                                         SeveralJobs::kListAsAnswer);
  if (!chosen) return exit_code;
  JobApi api(*chosen);
  auto nodes = api.Get("/api/nodes");
  if (!nodes) {
    std::cerr << UnreachableMessage(*chosen, "status", httplib::to_string(nodes.error()));
    return 1;
  }
  if (nodes->status != 200) {
    std::cerr << "sray: status: the dashboard of job " << JobLabel(*chosen) << " answered "
              << nodes->status << ": " << ServerSays(nodes->body)
              << ": check that the job still runs (sray status lists the running ones)\n";
    return 1;
  }
  std::cout << "job " << JobLabel(*chosen) << "  dashboard " << chosen->url << "  head "
            << chosen->head_hostname << "\n";
  PrintNodes(nlohmann::json::parse(nodes->body));
  if (auto training = api.Get("/api/training"); training && training->status == 200) {
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
