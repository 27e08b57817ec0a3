#include "dashboard/cluster_snapshot.h"

#include <algorithm>
#include <cstdio>
#include <functional>

#include <nlohmann/json.hpp>

namespace sray::dashboard {
namespace {

nlohmann::json NodeJson(const NodeSnapshot& node) {
  nlohmann::json json = {{"node_id", node.node_id},
                         {"hostname", node.hostname},
                         {"resources_total", node.total},
                         {"resources_available", node.available},
                         {"queued_tasks", node.queued_tasks},
                         {"worker_processes", node.worker_processes},
                         {"object_store",
                          {{"capacity_bytes", node.store_capacity},
                           {"in_memory_bytes", node.store_in_memory},
                           {"spilled_bytes", node.store_spilled},
                           {"objects", node.store_objects}}},
                         {"load",
                          {{"load_average_1m", node.load_average_1m},
                           {"memory_total_bytes", node.memory_total_bytes},
                           {"memory_available_bytes", node.memory_available_bytes},
                           {"sray_resident_bytes", node.resident_bytes}}}};
  if (!node.error.empty()) json["error"] = node.error;
  return json;
}

// A label value as the exposition format wants it: \, " and newline escaped.
std::string LabelValue(const std::string& text) {
  std::string escaped;
  for (const char character : text) {
    if (character == '\\' || character == '"') {
      escaped += '\\';
      escaped += character;
    } else if (character == '\n') {
      escaped += "\\n";
    } else {
      escaped += character;
    }
  }
  return escaped;
}

std::string Number(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.17g", value);
  return text;
}

}  // namespace

std::string NodesJson(const ClusterSnapshot& snapshot) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& node : snapshot.nodes) nodes.push_back(NodeJson(node));
  return nlohmann::json{
      {"job_id", snapshot.job_id}, {"step_id", snapshot.step_id}, {"nodes", nodes}}
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string EventsJson(const ClusterSnapshot& snapshot,
                       const std::vector<TrainingRunSnapshot>& runs) {
  std::vector<EventEntry> events = snapshot.events;
  for (const auto& run : runs) {
    events.push_back({.unix_time = run.started_unix_time,
                      .node = -1,
                      .kind = "training_started",
                      .message = "training run " + run.name + " started with " +
                                 std::to_string(run.num_workers) + " workers"});
    int attempt = 0;
    for (const auto& point : run.points) {
      if (point.attempt <= attempt) continue;
      attempt = point.attempt;
      events.push_back({.unix_time = point.unix_time,
                        .node = -1,
                        .kind = "training_restarted",
                        .message = "training run " + run.name + " restarted its workers (" +
                                   std::to_string(attempt) + ")"});
    }
    if (run.state != "running") {
      events.push_back(
          {.unix_time = run.points.empty() ? run.started_unix_time : run.points.back().unix_time,
           .node = -1,
           .kind = run.state == "finished" ? "training_finished" : "training_failed",
           .message = "training run " + run.name + " " + run.state});
    }
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const EventEntry& left, const EventEntry& right) {
                     return left.unix_time < right.unix_time;
                   });
  nlohmann::json list = nlohmann::json::array();
  for (const auto& event : events) {
    nlohmann::json json = {
        {"unix_time", event.unix_time}, {"kind", event.kind}, {"message", event.message}};
    if (event.node >= 0) json["node"] = event.node;
    list.push_back(std::move(json));
  }
  return nlohmann::json{{"events", std::move(list)}}.dump(-1, ' ', false,
                                                          nlohmann::json::error_handler_t::replace);
}

std::string LogIndexJson(const std::vector<LogFileEntry>& files) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& file : files) {
    list.push_back({{"node", file.node}, {"worker", file.worker}, {"bytes", file.bytes}});
  }
  return nlohmann::json{{"logs", std::move(list)}}.dump(-1, ' ', false,
                                                        nlohmann::json::error_handler_t::replace);
}

std::string LogChunkJson(const LogChunk& chunk) {
  return nlohmann::json{{"node", chunk.node},     {"worker", chunk.worker},
                        {"offset", chunk.offset}, {"next_offset", chunk.offset + chunk.data.size()},
                        {"size", chunk.size},     {"data", chunk.data}}
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string JobJson(const ClusterSnapshot& snapshot) {
  return nlohmann::json{
      {"job_id", snapshot.job_id}, {"step_id", snapshot.step_id}, {"nodes", snapshot.nodes.size()}}
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

std::string Dump(const nlohmann::json& json) {
  return json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::json CountsJson(const FunctionTaskCounts& counts) {
  return {{"queued", counts.queued},
          {"running", counts.running},
          {"finished", counts.finished},
          {"failed", counts.failed}};
}

void Add(FunctionTaskCounts& sum, const FunctionTaskCounts& counts) {
  sum.queued += counts.queued;
  sum.running += counts.running;
  sum.finished += counts.finished;
  sum.failed += counts.failed;
}

// Every node's counts summed by function, sorted by name.
std::map<std::string, FunctionTaskCounts> TasksByFunction(const ClusterSnapshot& snapshot) {
  std::map<std::string, FunctionTaskCounts> by_function;
  for (const auto& node : snapshot.nodes) {
    for (const auto& counts : node.tasks) Add(by_function[counts.function], counts);
  }
  return by_function;
}

}  // namespace

std::string TasksJson(const ClusterSnapshot& snapshot) {
  FunctionTaskCounts all;
  nlohmann::json functions = nlohmann::json::array();
  for (const auto& [function, counts] : TasksByFunction(snapshot)) {
    Add(all, counts);
    nlohmann::json json = CountsJson(counts);
    json["function"] = function;
    functions.push_back(std::move(json));
  }
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& node : snapshot.nodes) {
    FunctionTaskCounts sum;
    for (const auto& counts : node.tasks) Add(sum, counts);
    nlohmann::json json = CountsJson(sum);
    json["node"] = node.node_id;
    if (!node.error.empty()) json["error"] = node.error;
    nodes.push_back(std::move(json));
  }
  return Dump({{"by_state", CountsJson(all)},
               {"by_function", std::move(functions)},
               {"by_node", std::move(nodes)},
               {"counted",
                "functions and actor constructors run by node managers, and actor method calls "
                "(Class::Method, counted by each actor, up to 250 ms late); finished and failed "
                "count attempts since the job started, a retried task once per attempt"}});
}

std::string ActorsJson(const ClusterSnapshot& snapshot) {
  std::map<std::string, std::uint64_t> by_state;
  nlohmann::json list = nlohmann::json::array();
  for (const auto& actor : snapshot.actors) {
    ++by_state[actor.state];
    nlohmann::json json = {{"id", actor.id},
                           {"name", actor.name},
                           {"class", actor.class_name},
                           {"state", actor.state},
                           {"node", actor.node},
                           {"worker", actor.worker},
                           {"hostname", actor.hostname},
                           {"pid", actor.pid},
                           {"restarts", actor.restarts},
                           {"max_restarts", actor.max_restarts},
                           {"resources", actor.resources}};
    if (actor.placement_group != 0) json["placement_group"] = actor.placement_group;
    if (!actor.cause.empty()) json["cause"] = actor.cause;
    list.push_back(std::move(json));
  }
  return Dump({{"total", snapshot.actors_total},
               {"listed_by_state", by_state},
               {"actors", std::move(list)}});
}

std::string PlacementGroupsJson(const ClusterSnapshot& snapshot) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& group : snapshot.placement_groups) {
    list.push_back({{"id", group.id},
                    {"name", group.name},
                    {"strategy", group.strategy},
                    {"state", group.state},
                    {"bundles", group.bundles},
                    {"bundle_nodes", group.bundle_nodes}});
  }
  return Dump({{"total", snapshot.placement_groups_total}, {"placement_groups", std::move(list)}});
}

std::string ObjectsJson(const ClusterSnapshot& snapshot) {
  std::uint64_t objects = 0;
  std::uint64_t in_memory = 0;
  std::uint64_t spilled = 0;
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& node : snapshot.nodes) {
    objects += node.store_objects;
    in_memory += node.store_in_memory;
    spilled += node.store_spilled;
    nlohmann::json json = {{"node", node.node_id},
                           {"objects", node.store_objects},
                           {"in_memory_bytes", node.store_in_memory},
                           {"spilled_bytes", node.store_spilled},
                           {"capacity_bytes", node.store_capacity}};
    if (!node.error.empty()) json["error"] = node.error;
    nodes.push_back(std::move(json));
  }
  return Dump({{"objects", objects},
               {"in_memory_bytes", in_memory},
               {"spilled_bytes", spilled},
               {"nodes", std::move(nodes)}});
}

std::string TrainingJson(const std::vector<TrainingRunSnapshot>& runs) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& run : runs) {
    nlohmann::json points = nlohmann::json::array();
    for (const auto& point : run.points) {
      nlohmann::json json = {{"report", point.report},
                             {"attempt", point.attempt},
                             {"unix_time", point.unix_time},
                             {"metrics", point.metrics}};
      if (point.samples_per_second > 0) json["samples_per_second"] = point.samples_per_second;
      if (!point.checkpoint.empty()) json["checkpoint"] = point.checkpoint;
      points.push_back(std::move(json));
    }
    list.push_back({{"name", run.name},
                    {"storage_path", run.storage_path},
                    {"state", run.state},
                    {"num_workers", run.num_workers},
                    {"use_gpu", run.use_gpu},
                    {"restarts", run.restarts},
                    {"started_unix_time", run.started_unix_time},
                    {"points_dropped", run.points_dropped},
                    {"points", std::move(points)}});
  }
  return nlohmann::json{{"runs", std::move(list)}}.dump(-1, ' ', false,
                                                        nlohmann::json::error_handler_t::replace);
}

std::string MetricsText(const ClusterSnapshot& snapshot,
                        const std::vector<TrainingRunSnapshot>& runs) {
  std::string text;
  const std::string job_labels =
      "job=\"" + LabelValue(snapshot.job_id) + "\",step=\"" + LabelValue(snapshot.step_id) + "\"";
  auto family = [&](const std::string& name, const std::string& help,
                    const std::function<void(const NodeSnapshot&, const std::string&)>& samples) {
    text += "# HELP " + name + " " + help + "\n# TYPE " + name + " gauge\n";
    for (const auto& node : snapshot.nodes) {
      if (!node.error.empty()) continue;
      samples(node, job_labels + ",node=\"" + std::to_string(node.node_id) + "\"");
    }
  };
  auto each_resource = [&](const std::string& name, const std::string& help,
                           std::map<std::string, double> NodeSnapshot::*member) {
    family(name, help, [&](const NodeSnapshot& node, const std::string& labels) {
      for (const auto& [resource, amount] : node.*member) {
        text += name + "{" + labels + ",resource=\"" + LabelValue(resource) + "\"} " +
                Number(amount) + "\n";
      }
    });
  };
  auto one = [&](const std::string& name, const std::string& help,
                 std::uint64_t NodeSnapshot::*member) {
    family(name, help, [&](const NodeSnapshot& node, const std::string& labels) {
      text += name + "{" + labels + "} " + std::to_string(node.*member) + "\n";
    });
  };
  each_resource("sray_node_resource_total", "Resources a node offers.", &NodeSnapshot::total);
  each_resource("sray_node_resource_available", "Resources of a node not granted to tasks now.",
                &NodeSnapshot::available);
  one("sray_node_queued_tasks", "Tasks waiting for a worker on a node.",
      &NodeSnapshot::queued_tasks);
  one("sray_node_worker_processes", "Worker processes of a node.", &NodeSnapshot::worker_processes);
  one("sray_object_store_capacity_bytes", "Bytes a node's object store may hold in memory.",
      &NodeSnapshot::store_capacity);
  one("sray_object_store_memory_bytes", "Bytes of objects in a node's shared memory.",
      &NodeSnapshot::store_in_memory);
  one("sray_object_store_spilled_bytes", "Bytes of objects a node spilled to disk.",
      &NodeSnapshot::store_spilled);
  one("sray_object_store_objects", "Objects in a node's store.", &NodeSnapshot::store_objects);
  family("sray_node_load_average_1m", "The 1-minute load average of a node's machine.",
         [&](const NodeSnapshot& node, const std::string& labels) {
           if (node.load_average_1m >= 0) {
             text += "sray_node_load_average_1m{" + labels + "} " + Number(node.load_average_1m) +
                     "\n";
           }
         });
  one("sray_node_memory_total_bytes", "Memory of a node's machine.",
      &NodeSnapshot::memory_total_bytes);
  one("sray_node_memory_available_bytes", "Memory a node's machine has available.",
      &NodeSnapshot::memory_available_bytes);
  one("sray_node_resident_bytes", "Memory a node manager and its workers hold resident.",
      &NodeSnapshot::resident_bytes);

  const auto by_function = TasksByFunction(snapshot);
  text +=
      "# HELP sray_tasks Tasks waiting for a worker (queued) or handed to one (running), by "
      "function.\n# TYPE sray_tasks gauge\n";
  for (const auto& [function, counts] : by_function) {
    const std::string labels = job_labels + ",function=\"" + LabelValue(function) + "\"";
    text += "sray_tasks{" + labels + ",state=\"queued\"} " + std::to_string(counts.queued) + "\n";
    text += "sray_tasks{" + labels + ",state=\"running\"} " + std::to_string(counts.running) + "\n";
  }
  text +=
      "# HELP sray_task_attempts_total Task attempts that ended, by function and how.\n"
      "# TYPE sray_task_attempts_total counter\n";
  for (const auto& [function, counts] : by_function) {
    const std::string labels = job_labels + ",function=\"" + LabelValue(function) + "\"";
    text += "sray_task_attempts_total{" + labels + ",state=\"finished\"} " +
            std::to_string(counts.finished) + "\n";
    text += "sray_task_attempts_total{" + labels + ",state=\"failed\"} " +
            std::to_string(counts.failed) + "\n";
  }
  std::map<std::string, std::uint64_t> actor_states = {
      {"pending", 0}, {"alive", 0}, {"restarting", 0}, {"dead", 0}};
  for (const auto& actor : snapshot.actors) ++actor_states[actor.state];
  text += "# HELP sray_actors Actors by state (of the newest listed).\n# TYPE sray_actors gauge\n";
  for (const auto& [state, count] : actor_states) {
    text += "sray_actors{" + job_labels + ",state=\"" + LabelValue(state) + "\"} " +
            std::to_string(count) + "\n";
  }
  std::map<std::string, std::uint64_t> group_states = {
      {"pending", 0}, {"placed", 0}, {"removed", 0}};
  for (const auto& group : snapshot.placement_groups) ++group_states[group.state];
  text +=
      "# HELP sray_placement_groups Placement groups by state (of the newest listed).\n"
      "# TYPE sray_placement_groups gauge\n";
  for (const auto& [state, count] : group_states) {
    text += "sray_placement_groups{" + job_labels + ",state=\"" + LabelValue(state) + "\"} " +
            std::to_string(count) + "\n";
  }

  auto run_family =
      [&](const std::string& name, const std::string& help,
          const std::function<void(const TrainingRunSnapshot&, const std::string&)>& samples) {
        text += "# HELP " + name + " " + help + "\n# TYPE " + name + " gauge\n";
        for (const auto& run : runs)
          samples(run, job_labels + ",run=\"" + LabelValue(run.name) + "\"");
      };
  run_family("sray_training_reports", "Reports of a training run so far.",
             [&](const TrainingRunSnapshot& run, const std::string& labels) {
               const std::uint64_t reports = run.points.empty() ? 0 : run.points.back().report;
               text += "sray_training_reports{" + labels + "} " + std::to_string(reports) + "\n";
             });
  run_family("sray_training_restarts", "Group restarts of a training run.",
             [&](const TrainingRunSnapshot& run, const std::string& labels) {
               text +=
                   "sray_training_restarts{" + labels + "} " + std::to_string(run.restarts) + "\n";
             });
  run_family("sray_training_metric", "The last value of each metric a training run reported.",
             [&](const TrainingRunSnapshot& run, const std::string& labels) {
               if (run.points.empty()) return;
               for (const auto& [metric, value] : run.points.back().metrics) {
                 text += "sray_training_metric{" + labels + ",metric=\"" + LabelValue(metric) +
                         "\"} " + Number(value) + "\n";
               }
             });
  run_family("sray_training_samples_per_second",
             "Samples per second over all workers of a training run, at its last report.",
             [&](const TrainingRunSnapshot& run, const std::string& labels) {
               if (run.points.empty() || run.points.back().samples_per_second <= 0) return;
               text += "sray_training_samples_per_second{" + labels + "} " +
                       Number(run.points.back().samples_per_second) + "\n";
             });
  return text;
}

}  // namespace sray::dashboard
