#include "logs_command.h"

#include <chrono>
#include <iomanip>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "job_api.h"

namespace sray::launcher {
namespace {

struct LogsArguments {
  std::string job;
  int node = -1;
  int worker = -1;
  bool follow = false;
  bool on_head = false;
};

int ListLogs(JobApi& api, const dashboard::JobsFileContent& job) {
  auto listed = api.Get("/api/logs");
  if (!listed || listed->status != 200) {
    std::cerr << "sray: logs: the dashboard of job " << JobLabel(job) << " did not list its logs"
              << (listed ? ": " + ServerSays(listed->body) : std::string())
              << ": check that the job still runs (sray status)\n";
    return 1;
  }
  const auto logs = nlohmann::json::parse(listed->body)["logs"];
  if (logs.empty()) {
    std::cout << "no worker of job " << JobLabel(job) << " has printed anything yet\n";
    return 0;
  }
  std::cout << std::left << std::setw(6) << "node" << std::setw(12) << "worker"
            << "bytes\n";
  for (const auto& log : logs) {
    std::cout << std::left << std::setw(6) << log["node"].get<int>() << std::setw(12)
              << log["worker"].get<std::uint32_t>() << log["bytes"].get<std::uint64_t>() << "\n";
  }
  std::cout << "show one: sray logs " << JobLabel(job) << " --node N --worker W [--follow]\n";
  return 0;
}

int ShowLog(JobApi& api, const dashboard::JobsFileContent& job, const LogsArguments& arguments) {
  const std::string base =
      "/api/logs/" + std::to_string(arguments.node) + "/" + std::to_string(arguments.worker);
  std::string path = base;
  while (true) {
    auto answer = api.Get(path);
    if (!answer) {
      if (arguments.follow) return 0;  // the job ended
      std::cerr << UnreachableMessage(job, "logs", httplib::to_string(answer.error()));
      return 1;
    }
    if (answer->status != 200) {
      std::cerr << "sray: logs: node " << arguments.node << " worker " << arguments.worker << ": "
                << ServerSays(answer->body) << ": `sray logs " << JobLabel(job)
                << "` lists the workers that have logs\n";
      return 1;
    }
    const auto chunk = nlohmann::json::parse(answer->body);
    const std::string data = chunk["data"].get<std::string>();
    std::cout << data << std::flush;
    // The server's count of raw bytes: `data` had bytes that are not UTF-8
    // replaced, which changes its length.
    const std::uint64_t next = chunk["next_offset"].get<std::uint64_t>();
    path = base + "?offset=" + std::to_string(next);
    if (next < chunk["size"].get<std::uint64_t>()) continue;  // more at once
    if (!arguments.follow) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

int Logs(const LogsArguments& arguments) {
  if ((arguments.node < 0) != (arguments.worker < 0)) {
    std::cerr << "sray: logs: give --node and --worker together (sray logs lists them)\n";
    return 2;
  }
  int exit_code = 0;
  const auto chosen = ChooseJob(arguments.job, "logs", exit_code);
  if (!chosen) return exit_code;
  JobApi api(*chosen);
  if (DashboardIsElsewhere(*chosen)) {
    if (!arguments.on_head) {
      std::vector<std::string> forwarded = {JobLabel(*chosen)};
      if (arguments.node >= 0) {
        forwarded.insert(forwarded.end(), {"--node", std::to_string(arguments.node), "--worker",
                                           std::to_string(arguments.worker)});
      }
      if (arguments.follow) forwarded.emplace_back("--follow");
      HopToHead(*chosen, "logs", forwarded);
    }
    std::cerr << UnreachableMessage(*chosen, "logs",
                                    "it listens on the loopback of " + chosen->head_hostname +
                                        ", and srun could not take this command there");
    return 1;
  }
  if (arguments.worker < 0) return ListLogs(api, *chosen);
  return ShowLog(api, *chosen, arguments);
}

}  // namespace

void AddLogsCommand(CLI::App& app) {
  auto arguments = std::make_shared<LogsArguments>();
  auto* logs = app.add_subcommand("logs", "Show what a running job's workers printed");
  logs->add_option("job", arguments->job, "JOB or JOB.STEP (default: the only running one)");
  logs->add_option("--node", arguments->node, "the worker's node")->check(CLI::NonNegativeNumber);
  logs->add_option("--worker", arguments->worker, "the worker (its rank, as `sray logs` lists it)")
      ->check(CLI::NonNegativeNumber);
  logs->add_flag("--follow,-f", arguments->follow, "keep printing new lines until the job ends");
  logs->add_flag("--on-head", arguments->on_head, "run on the head node already (no hop)")
      ->group("");
  logs->callback([arguments] { throw CLI::RuntimeError(Logs(*arguments)); });
}

}  // namespace sray::launcher
