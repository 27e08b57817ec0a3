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

#include "job_api.h"
#include "private_output.h"

namespace sray::launcher {
namespace {

struct LoginArguments {
  std::string job;       // JOB or JOB.STEP; empty: the only one
  bool on_head = false;  // set by the hop: do not hop again
};

// HOST and PORT of "http://HOST:PORT/..." (HOST may be a bracketed IPv6
// address); nullopt for anything else, whose ssh hint is then left out.
std::optional<std::pair<std::string, std::string>> HostAndPort(const std::string& url) {
  constexpr std::string_view kScheme = "http://";
  if (!url.starts_with(kScheme)) return std::nullopt;
  const std::string rest = url.substr(kScheme.size());
  const std::string address = rest.substr(0, rest.find('/'));
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) return std::nullopt;
  if (address.find(']') != std::string::npos && address.rfind(']') > colon) return std::nullopt;
  const std::string port = address.substr(colon + 1);
  if (port.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return std::pair{address.substr(0, colon), port};
}

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
  if (const auto address = HostAndPort(chosen->url)) {
    std::cerr << "; from another machine first: ssh -L " << address->second << ":" << address->first
              << ":" << address->second << " " << chosen->head_hostname;
  }
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
