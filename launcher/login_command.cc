#include "login_command.h"

#include <unistd.h>

#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "dashboard/dashboard_address.h"
#include "job_api.h"
#include "private_output.h"

namespace sray::launcher {
namespace {

struct LoginArguments {
  std::string job;       // JOB or JOB.STEP; empty: the only one
  bool on_head = false;  // set by the hop: do not hop again
};

int Login(const LoginArguments& arguments) {
  // A batch script's slurm-%j.out is often 0644: whoever opens the
  // one-time link there first is logged in.
  if (const auto shared = RegularFileOthersMayRead(STDOUT_FILENO)) {
    std::cerr << "sray: login: not printing a login link to " << *shared
              << ": others may read that file, and the link logs in whoever opens it first; "
                 "print it to the terminal, or to a file only you can read (umask 077)\n";
    return 1;
  }
  int exit_code = 0;
  const auto chosen = ChooseReachableJob(arguments.job, "login", arguments.on_head, exit_code);
  if (!chosen) return exit_code;
  JobApi api(*chosen);
  auto answer = api.Post("/api/login_link");
  if (!answer) {
    std::cerr << UnreachableMessage(*chosen, "login", httplib::to_string(answer.error()));
    return 1;
  }
  if (answer->status != 200) {
    std::cerr << "sray: login: the dashboard of job " << JobLabel(*chosen) << " answered "
              << answer->status << ": " << ServerSays(answer->body)
              << ": check that the job still runs (sray status lists the running ones)\n";
    return 1;
  }
  const auto link = nlohmann::json::parse(answer->body, nullptr, false);
  if (!link.is_object() || !link.contains("url") || !link["url"].is_string()) {
    std::cerr << "sray: login: the dashboard of job " << JobLabel(*chosen)
              << " sent no link: is it an sray of the same version as this command?\n";
    return 1;
  }
  std::cout << link["url"].get<std::string>() << "\n";
  std::cerr << "sray: the link logs one browser in, once, within 10 minutes";
  // The tunnel's far end is the dashboard as its head reaches it: older
  // jobs files have no local_url, and their url served (a wildcard is not).
  const std::string tunnel = dashboard::SshTunnelCommand(
      chosen->local_url.empty() ? chosen->url : chosen->local_url, chosen->head_hostname);
  if (!tunnel.empty()) std::cerr << "; from another machine first: " << tunnel;
  std::cerr << "\n";
  return 0;
}

}  // namespace

void AddLoginCommand(CLI::App& app) {
  auto arguments = std::make_shared<LoginArguments>();
  auto* login =
      app.add_subcommand("login", "Print a one-time login link to a running job's dashboard");
  login->add_option("job", arguments->job, "JOB or JOB.STEP (default: the only running one)");
  login->add_flag("--on-head", arguments->on_head, "run on the head node already (no hop)")
      ->group("");
  login->callback([arguments] { throw CLI::RuntimeError(Login(*arguments)); });
}

}  // namespace sray::launcher
