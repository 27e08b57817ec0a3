#include "dashboard/cluster_snapshot.h"

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
      .dump();
}

std::string JobJson(const ClusterSnapshot& snapshot) {
  return nlohmann::json{
      {"job_id", snapshot.job_id}, {"step_id", snapshot.step_id}, {"nodes", snapshot.nodes.size()}}
      .dump();
}

std::string MetricsText(const ClusterSnapshot& snapshot) {
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
  return text;
}

}  // namespace sray::dashboard
