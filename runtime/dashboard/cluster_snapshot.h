#pragma once

// What the dashboard shows of a running job, as plain values, and its two
// renderings: JSON for /api and Prometheus text for /metrics. Gathered by
// the driver (core), rendered here without knowing where it came from.

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace sray::dashboard {

// Tasks of one function on a node: functions and actor constructors, which
// node managers run, and actor method calls ("Class::Method"), which each
// actor's worker counts and reports to its node manager.
struct FunctionTaskCounts {
  std::string function;
  std::uint64_t queued = 0;
  std::uint64_t running = 0;
  std::uint64_t finished = 0;
  std::uint64_t failed = 0;
};

struct NodeSnapshot {
  std::uint32_t node_id = 0;
  std::string hostname;
  std::map<std::string, double> total;
  std::map<std::string, double> available;
  std::uint64_t queued_tasks = 0;
  std::uint64_t worker_processes = 0;
  std::uint64_t store_capacity = 0;
  std::uint64_t store_in_memory = 0;
  std::uint64_t store_spilled = 0;
  std::uint64_t store_objects = 0;
  // The machine's 1-minute load average (-1: unknown) and memory, and what
  // the node manager and its workers hold resident.
  double load_average_1m = -1;
  std::uint64_t memory_total_bytes = 0;
  std::uint64_t memory_available_bytes = 0;
  std::uint64_t resident_bytes = 0;
  std::vector<FunctionTaskCounts> tasks;
  std::string error;  // set when the node did not answer
};

struct ActorSnapshot {
  std::uint64_t id = 0;
  std::string name;  // empty: anonymous
  std::string class_name;
  std::string state;  // pending, alive, restarting, dead
  std::uint32_t node = 0;
  std::uint32_t worker = 0;  // its log: /api/logs/NODE/WORKER
  std::string hostname;
  std::int64_t pid = 0;
  std::int32_t restarts = 0;
  std::int32_t max_restarts = 0;
  std::map<std::string, double> resources;
  std::uint64_t placement_group = 0;  // 0: none
  std::string cause;                  // why it died, or last restarted
};

struct PlacementGroupSnapshot {
  std::uint64_t id = 0;
  std::string name;
  std::string strategy;
  std::string state;  // pending, placed, removed
  std::vector<std::map<std::string, double>> bundles;
  std::vector<std::uint32_t> bundle_nodes;  // when placed
};

// Something that happened in the job, for /api/events.
struct EventEntry {
  double unix_time = 0;
  std::int64_t node = -1;  // -1: the job as a whole (the driver)
  std::string kind;
  std::string message;
};

struct ClusterSnapshot {
  std::string job_id;
  std::string step_id;
  std::vector<NodeSnapshot> nodes;
  std::vector<EventEntry> events;  // of every node, oldest first
  // The newest actors and placement groups, and how many there are.
  std::vector<ActorSnapshot> actors;
  std::size_t actors_total = 0;
  std::vector<PlacementGroupSnapshot> placement_groups;
  std::size_t placement_groups_total = 0;
};

// One report of a training run (rank 0's metrics).
struct TrainingPoint {
  std::uint64_t report = 0;
  int attempt = 0;  // group restarts before it
  double unix_time = 0;
  double samples_per_second = 0;  // 0 when not known
  std::map<std::string, double> metrics;
  std::string checkpoint;
};

struct TrainingRunSnapshot {
  std::string name;
  std::string storage_path;
  std::string state;  // running, finished, failed: ...
  int num_workers = 0;
  bool use_gpu = false;
  int restarts = 0;
  double started_unix_time = 0;
  std::uint64_t points_dropped = 0;  // the oldest, beyond what is kept
  std::vector<TrainingPoint> points;
};

// Workers' log files (what they printed), by node.
struct LogFileEntry {
  std::uint32_t node = 0;
  std::uint32_t worker = 0;
  std::uint64_t bytes = 0;
};
struct LogChunk {
  std::uint32_t node = 0;
  std::uint32_t worker = 0;
  std::uint64_t offset = 0;  // where `data` starts in the file (its end: offset + data.size())
  std::uint64_t size = 0;    // the file's size now
  std::string data;
};

std::string NodesJson(const ClusterSnapshot& snapshot);
// The cluster's events and the training runs' starts, restarts and ends,
// oldest first.
std::string EventsJson(const ClusterSnapshot& snapshot,
                       const std::vector<TrainingRunSnapshot>& runs);
std::string LogIndexJson(const std::vector<LogFileEntry>& files);
// Bytes that are not UTF-8 are replaced (U+FFFD): workers print anything.
std::string LogChunkJson(const LogChunk& chunk);
std::string JobJson(const ClusterSnapshot& snapshot);
// Task counts by state, by function and by node.
std::string TasksJson(const ClusterSnapshot& snapshot);
// Actors by state, and the newest listed.
std::string ActorsJson(const ClusterSnapshot& snapshot);
std::string PlacementGroupsJson(const ClusterSnapshot& snapshot);
// Objects and their bytes per node, and in all.
std::string ObjectsJson(const ClusterSnapshot& snapshot);
std::string TrainingJson(const std::vector<TrainingRunSnapshot>& runs);
// Prometheus text exposition format 0.0.4, every sample labelled with the
// job and step, and the node or training run.
std::string MetricsText(const ClusterSnapshot& snapshot,
                        const std::vector<TrainingRunSnapshot>& runs);

}  // namespace sray::dashboard
