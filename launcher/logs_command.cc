#include "logs_command.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "command_line.h"
#include "common/status.h"
#include "common/whole_number.h"
#include "common/worker_log_files.h"
#include "job_api.h"

namespace sray::launcher {
namespace {

struct LogsArguments {
  std::string job;
  int node = -1;
  int worker = -1;
  std::string actor;
  std::string log_dir;
  bool follow = false;
  bool on_head = false;
};

struct LogEntry {
  std::uint32_t node = 0;
  std::uint32_t worker = 0;
  std::uint64_t bytes = 0;
};
// What a first read shows of a log: its end (the dashboard's size too).
constexpr std::uint64_t kTailBytes = 256 * 1024;

struct LogPiece {
  std::string data;
  std::uint64_t offset = 0;  // where `data` starts
  std::uint64_t next_offset = 0;
  std::uint64_t size = 0;
};
struct WorkerOf {
  std::uint32_t node = 0;
  std::uint32_t worker = 0;
};

// Where the logs come from: a running job's dashboard, or the copy a
// job's nodes left under log_dir= when its step ended. Errors are the
// reason, without "sray: logs: ".
class LogSource {
 public:
  virtual ~LogSource() = default;
  [[nodiscard]] virtual std::string Label() const = 0;
  [[nodiscard]] virtual bool Live() const = 0;
  // Whether the job has ended (its driver removed its jobs file), for a
  // follow whose dashboard stopped answering: the end, or a failure.
  [[nodiscard]] virtual bool Ended() const = 0;
  virtual Result<std::vector<LogEntry>> List() = 0;
  // From `offset`, or the last kTailBytes when there is none.
  virtual Result<LogPiece> Read(std::uint32_t node, std::uint32_t worker,
                                std::optional<std::uint64_t> offset) = 0;
  // The /api/actors document (the same one is kept as actors.json).
  virtual Result<nlohmann::json> Actors() = 0;
};

Result<nlohmann::json> ParseJson(const std::string& text, const std::string& what) {
  auto json = nlohmann::json::parse(text, nullptr, false);
  if (json.is_discarded()) return Status::IoError(what + " is not JSON");
  return json;
}

class DashboardSource : public LogSource {
 public:
  explicit DashboardSource(dashboard::JobsFileContent job) : job_(std::move(job)), api_(job_) {}
  [[nodiscard]] std::string Label() const override { return JobLabel(job_); }
  [[nodiscard]] bool Live() const override { return true; }
  [[nodiscard]] bool Ended() const override {
    std::error_code error;
    return !std::filesystem::exists(
        dashboard::JobsFilePath(dashboard::UserHome(), job_.job_id, job_.step_id), error);
  }

  Result<std::vector<LogEntry>> List() override {
    auto listed = Ask("/api/logs");
    if (!listed.ok()) return listed.status();
    std::vector<LogEntry> entries;
    for (const auto& log : (*listed)["logs"]) {
      entries.push_back({.node = log["node"].get<std::uint32_t>(),
                         .worker = log["worker"].get<std::uint32_t>(),
                         .bytes = log["bytes"].get<std::uint64_t>()});
    }
    return entries;
  }
  Result<LogPiece> Read(std::uint32_t node, std::uint32_t worker,
                        std::optional<std::uint64_t> offset) override {
    auto chunk = Ask("/api/logs/" + std::to_string(node) + "/" + std::to_string(worker) +
                     (offset ? "?offset=" + std::to_string(*offset) : std::string()));
    if (!chunk.ok()) return chunk.status();
    // next_offset is the server's count of raw bytes: `data` had bytes that
    // are not UTF-8 replaced, which changes its length.
    return LogPiece{.data = (*chunk)["data"].get<std::string>(),
                    .offset = (*chunk)["offset"].get<std::uint64_t>(),
                    .next_offset = (*chunk)["next_offset"].get<std::uint64_t>(),
                    .size = (*chunk)["size"].get<std::uint64_t>()};
  }
  Result<nlohmann::json> Actors() override { return Ask("/api/actors"); }

 private:
  Result<nlohmann::json> Ask(const std::string& path) {
    auto answer = api_.Get(path);
    if (!answer) {
      return Status::Unavailable("cannot reach the dashboard of job " + Label() + " (" +
                                 httplib::to_string(answer.error()) +
                                 "): check that the job still runs (sray status)");
    }
    if (answer->status == 404) return Status::NotFound(ServerSays(answer->body));
    if (answer->status != 200) return Status::Unavailable(ServerSays(answer->body));
    return ParseJson(answer->body, "the dashboard's answer to " + path);
  }

  dashboard::JobsFileContent job_;
  JobApi api_;
};

class CopySource : public LogSource {
 public:
  CopySource(std::filesystem::path directory, std::string label)
      : directory_(std::move(directory)), label_(std::move(label)) {}
  [[nodiscard]] std::string Label() const override { return label_; }
  [[nodiscard]] bool Live() const override { return false; }
  [[nodiscard]] bool Ended() const override { return true; }

  Result<std::vector<LogEntry>> List() override {
    std::vector<LogEntry> entries;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(directory_, error)) {
      const std::string name = entry.path().filename().string();
      if (!name.starts_with("node-")) continue;
      const auto node = WholeNumber<std::uint32_t>(std::string_view(name).substr(5));
      if (!node) continue;
      for (const auto& file : ListWorkerLogs(entry.path())) {
        entries.push_back({.node = *node, .worker = file.rank, .bytes = file.size});
      }
    }
    if (error) return Status::FromErrno(error.value(), "listing " + directory_.string());
    std::sort(entries.begin(), entries.end(), [](const LogEntry& left, const LogEntry& right) {
      return std::tie(left.node, left.worker) < std::tie(right.node, right.worker);
    });
    return entries;
  }
  Result<LogPiece> Read(std::uint32_t node, std::uint32_t worker,
                        std::optional<std::uint64_t> offset) override {
    auto chunk = ReadWorkerLog(directory_ / ("node-" + std::to_string(node)), worker,
                               offset ? static_cast<std::int64_t>(*offset) : -1, kTailBytes);
    if (!chunk.ok()) return chunk.status();
    const std::uint64_t next = chunk->offset + chunk->data.size();
    return LogPiece{.data = std::move(chunk->data),
                    .offset = chunk->offset,
                    .next_offset = next,
                    .size = chunk->size};
  }
  Result<nlohmann::json> Actors() override {
    const auto path = directory_ / "actors.json";
    std::ifstream file(path);
    if (!file) {
      return Status::NotFound("the copy in " + directory_.string() +
                              " has no actors.json (the driver did not end normally)");
    }
    const std::string text((std::istreambuf_iterator<char>(file)),
                           std::istreambuf_iterator<char>());
    return ParseJson(text, path.string());
  }

 private:
  std::filesystem::path directory_;
  std::string label_;
};

int ListLogs(LogSource& source) {
  auto logs = source.List();
  if (!logs.ok()) {
    std::cerr << "sray: logs: the logs of job " << source.Label()
              << " cannot be listed: " << logs.status().message() << "\n";
    return 1;
  }
  if (logs->empty()) {
    std::cout << "no worker of job " << source.Label() << " has printed anything"
              << (source.Live() ? " yet" : "") << "\n";
    return 0;
  }
  std::cout << std::left << std::setw(6) << "node" << std::setw(12) << "worker"
            << "bytes\n";
  for (const auto& log : *logs) {
    std::cout << std::left << std::setw(6) << log.node << std::setw(12) << log.worker << log.bytes
              << "\n";
  }
  std::cout << "show one: sray logs " << source.Label() << " --node N --worker W"
            << (source.Live() ? " [--follow]" : "") << ", or --actor NAME\n";
  return 0;
}

// The node and worker of the actor named `wanted` (or with that id): a
// live one before a dead one, the newest first.
Result<WorkerOf> FindActor(LogSource& source, const std::string& wanted) {
  auto actors = source.Actors();
  if (!actors.ok()) return actors.status();
  const nlohmann::json* found = nullptr;
  for (const auto& actor : (*actors)["actors"]) {
    const bool matches = actor["name"].get<std::string>() == wanted ||
                         std::to_string(actor["id"].get<std::uint64_t>()) == wanted;
    if (!matches) continue;
    const bool started = actor["pid"].get<std::int64_t>() != 0;
    if (!started) {
      if (found == nullptr) found = &actor;
      continue;
    }
    if (found == nullptr || (*found)["pid"].get<std::int64_t>() == 0 ||
        actor["state"].get<std::string>() != "dead" ||
        (*found)["state"].get<std::string>() == "dead") {
      found = &actor;
    }
  }
  if (found == nullptr) {
    return Status::NotFound("job " + source.Label() + " has no actor named " + wanted +
                            " (names are given with ActorOptions::name; an actor's id works too)");
  }
  if ((*found)["pid"].get<std::int64_t>() == 0) {
    return Status::NotFound("actor " + wanted + " of job " + source.Label() +
                            " has not started a process yet (" +
                            (*found)["state"].get<std::string>() + ")");
  }
  return WorkerOf{.node = (*found)["node"].get<std::uint32_t>(),
                  .worker = (*found)["worker"].get<std::uint32_t>()};
}

int ShowLog(LogSource& source, WorkerOf chosen, bool follow) {
  std::optional<std::uint64_t> offset;
  while (true) {
    const bool first = !offset;
    auto piece = source.Read(chosen.node, chosen.worker, offset);
    if (!piece.ok()) {
      // The dashboard goes with the job: a follow that read before ends with
      // it. Anything else (unreachable from the start, a frozen head, a
      // wrong token) is a failure, said as such; it used to end with 0.
      if (follow && !first && piece.status().code() == StatusCode::kUnavailable) {
        // The driver removes its jobs file just after its dashboard stops.
        for (int look = 0; look < 50 && !source.Ended(); ++look) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        if (source.Ended()) return 0;
      }
      std::cerr << "sray: logs: node " << chosen.node << " worker " << chosen.worker << ": "
                << piece.status().message() << ": `sray logs " << source.Label()
                << "` lists the workers that have logs\n";
      return 1;
    }
    if (first && piece->offset > 0) {
      std::cerr << "sray: logs: the last " << piece->size - piece->offset << " of " << piece->size
                << " bytes\n";
    }
    std::cout << piece->data << std::flush;
    offset = piece->next_offset;
    if (*offset < piece->size) continue;  // more at once
    if (!follow || !source.Live()) return 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

// The copy of `wanted` (JOB or JOB.STEP) under `log_dir`, or nullopt once
// it said why.
std::optional<std::filesystem::path> ChooseCopy(const std::filesystem::path& log_dir,
                                                const std::string& wanted, int& exit_code) {
  std::vector<std::string> kept;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(log_dir, error)) {
    if (entry.is_directory()) kept.push_back(entry.path().filename().string());
  }
  if (error) {
    std::cerr << "sray: logs: cannot read " << log_dir.string() << ": " << error.message()
              << ": give the directory the job's log_dir= option named\n";
    exit_code = 1;
    return std::nullopt;
  }
  std::sort(kept.begin(), kept.end());
  std::vector<std::string> matching;
  for (const auto& name : kept) {
    if (wanted.empty() || name == wanted || name.starts_with(wanted + "."))
      matching.push_back(name);
  }
  if (matching.size() == 1) return log_dir / matching.front();
  if (kept.empty()) {
    std::cerr << "sray: logs: " << log_dir.string()
              << " holds no job's logs: they are copied there when a step started with "
                 "log_dir="
              << log_dir.string() << " ends\n";
    exit_code = 1;
    return std::nullopt;
  }
  // Which job is meant is unclear either way: the list goes with the error
  // (standard output may be captured as the log).
  std::cerr << (wanted.empty() || !matching.empty()
                    ? "sray: logs: several jobs' logs are kept in " + log_dir.string() +
                          ": name one, sray logs JOB.STEP --log-dir " + log_dir.string() +
                          ", from these:"
                    : "sray: logs: no logs of job " + wanted + " in " + log_dir.string() +
                          ": name one of those kept there:")
            << "\n";
  for (const auto& name : matching.empty() ? kept : matching) std::cerr << "  " << name << "\n";
  exit_code = 1;
  return std::nullopt;
}

int Logs(const LogsArguments& arguments) {
  if ((arguments.node < 0) != (arguments.worker < 0)) {
    std::cerr << "sray: logs: give --node and --worker together (sray logs lists them)\n";
    return 2;
  }
  if (!arguments.actor.empty() && arguments.node >= 0) {
    std::cerr << "sray: logs: give --actor or --node and --worker, not both\n";
    return 2;
  }
  int exit_code = 0;
  std::unique_ptr<LogSource> source;
  if (!arguments.log_dir.empty()) {
    const auto copy = ChooseCopy(arguments.log_dir, arguments.job, exit_code);
    if (!copy) return exit_code;
    source = std::make_unique<CopySource>(*copy, copy->filename().string());
  } else {
    const auto chosen = ChooseJob(arguments.job, "logs", exit_code);
    if (!chosen) return exit_code;
    if (DashboardIsElsewhere(*chosen)) {
      if (!arguments.on_head) {
        std::vector<std::string> forwarded = {JobLabel(*chosen)};
        if (arguments.node >= 0) {
          forwarded.insert(forwarded.end(), {"--node", std::to_string(arguments.node), "--worker",
                                             std::to_string(arguments.worker)});
        }
        if (!arguments.actor.empty())
          forwarded.insert(forwarded.end(), {"--actor", arguments.actor});
        if (arguments.follow) forwarded.emplace_back("--follow");
        HopToHead(*chosen, "logs", forwarded);
      }
      std::cerr << UnreachableMessage(*chosen, "logs",
                                      "it listens on the loopback of " + chosen->head_hostname +
                                          ", and srun could not take this command there");
      return 1;
    }
    source = std::make_unique<DashboardSource>(*chosen);
  }
  if (!arguments.actor.empty()) {
    auto actor = FindActor(*source, arguments.actor);
    if (!actor.ok()) {
      std::cerr << "sray: logs: " << actor.status().message() << "\n";
      return 1;
    }
    return ShowLog(*source, *actor, arguments.follow);
  }
  if (arguments.worker < 0) return ListLogs(*source);
  return ShowLog(*source,
                 WorkerOf{.node = static_cast<std::uint32_t>(arguments.node),
                          .worker = static_cast<std::uint32_t>(arguments.worker)},
                 arguments.follow);
}

}  // namespace

void AddLogsCommand(CLI::App& app) {
  auto arguments = std::make_shared<LogsArguments>();
  auto* logs = app.add_subcommand("logs", "Show what a job's workers and actors printed");
  logs->add_option("job", arguments->job, "JOB or JOB.STEP (default: the only running one)");
  logs->add_option("--node", arguments->node, "the worker's node")
      ->check(WholeNumberFrom(0, 1U << 30));
  logs->add_option("--worker", arguments->worker, "the worker (its rank, as `sray logs` lists it)")
      ->check(WholeNumberFrom(0, 1U << 30));
  logs->add_option("--actor", arguments->actor, "the actor's name (or id): its process's log");
  logs->add_option("--log-dir", arguments->log_dir,
                   "read the copy an ended job left in DIR (its log_dir= option)")
      ->check(CLI::ExistingDirectory);
  logs->add_flag("--follow,-f", arguments->follow, "keep printing new lines until the job ends");
  logs->add_flag("--on-head", arguments->on_head, "run on the head node already (no hop)")
      ->group("");
  logs->callback([arguments] { throw CLI::RuntimeError(Logs(*arguments)); });
}

}  // namespace sray::launcher
