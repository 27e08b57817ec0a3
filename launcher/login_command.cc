#include "login_command.h"

#include <iostream>
#include <memory>
#include <string>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "job_api.h"

namespace sray::launcher {
namespace {

struct LoginArguments {
  std::string job;       // JOB or JOB.STEP; empty: the only one
  bool on_head = false;  // set by the hop: do not hop again
};

int Login(const LoginArguments& arguments) {
  int exit_code = 0;
  const auto chosen = ChooseJob(arguments.job, "login", exit_code);
  if (!chosen) return exit_code;
  if (DashboardIsElsewhere(*chosen)) {
    if (!arguments.on_head) HopToHead(*chosen, "login", {JobLabel(*chosen)});
    std::cerr << UnreachableMessage(*chosen, "login",
                                    "it listens on the loopback of " + chosen->head_hostname +
                                        ", and srun could not take this command there");
    return 1;
  }
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
  // http://HOST:PORT/ : the browser elsewhere reaches HOST:PORT through ssh.
  const std::string& url = chosen->url;
  const auto host_start = url.find("://") + 3;
  const std::string address = url.substr(host_start, url.find('/', host_start) - host_start);
  const std::string port = address.substr(address.rfind(':') + 1);
  std::cout << link["url"].get<std::string>() << "\n";
  std::cerr << "sray: the link logs one browser in, once, within 10 minutes; from another "
               "machine first: ssh -L "
            << port << ":" << address << " " << chosen->head_hostname << "\n";
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
