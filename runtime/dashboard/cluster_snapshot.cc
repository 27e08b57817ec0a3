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
                           {"objects", node.store_objects}}}};
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
  return nlohmann::json{{"node", chunk.node},
                        {"worker", chunk.worker},
                        {"offset", chunk.offset},
                        {"next_offset", chunk.offset + chunk.data.size()},
                        {"size", chunk.size},
                        {"data", chunk.data}}
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string JobJson(const ClusterSnapshot& snapshot) {
  return nlohmann::json{
      {"job_id", snapshot.job_id}, {"step_id", snapshot.step_id}, {"nodes", snapshot.nodes.size()}}
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
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
