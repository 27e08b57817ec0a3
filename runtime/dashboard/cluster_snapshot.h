#pragma once

// What the dashboard shows of a running job, as plain values, and its two
// renderings: JSON for /api and Prometheus text for /metrics. Gathered by
// the driver (core), rendered here without knowing where it came from.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace sray::dashboard {

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
  std::string error;  // set when the node did not answer
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
std::string TrainingJson(const std::vector<TrainingRunSnapshot>& runs);
// Prometheus text exposition format 0.0.4, every sample labelled with the
// job and step, and the node or training run.
std::string MetricsText(const ClusterSnapshot& snapshot,
                        const std::vector<TrainingRunSnapshot>& runs);

}  // namespace sray::dashboard
