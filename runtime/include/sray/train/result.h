#pragma once

// What Fit returns, and the error it throws when training failed for good.

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sray/errors.h"
#include "sray/train/checkpoint.h"
#include "sray/train/config.h"

namespace sray::train {

struct Result {
  Metrics metrics;                   // rank 0's last report
  std::vector<Metrics> metrics_history;  // every report of rank 0, in order, across restarts
  // The latest one in storage (the one resumed from, when this Fit stored none).
  std::optional<Checkpoint> checkpoint;
  // The kept checkpoints with their reports, best first when a
  // score_attribute is set, else newest first.
  std::vector<std::pair<Checkpoint, Metrics>> best_checkpoints;
  int num_failures = 0;  // group restarts that happened
  std::string path;      // storage_path/name
};

// Training failed and max_failures allowed no further restart. what() names
// the worker, its node and the cause of the first failure (and of the last,
// when restarts failed again); the accessors give the first one's apart.
class TrainingFailedError : public Error {
 public:
  TrainingFailedError(const std::string& what, int world_rank, std::uint32_t node_id,
                      std::int64_t pid, std::string cause, int num_failures)
      : Error(what),
        world_rank_(world_rank),
        node_id_(node_id),
        pid_(pid),
        cause_(std::move(cause)),
        num_failures_(num_failures) {}
  [[nodiscard]] int world_rank() const { return world_rank_; }  // -1: not one worker's
  [[nodiscard]] std::uint32_t node_id() const { return node_id_; }
  [[nodiscard]] std::int64_t pid() const { return pid_; }
  [[nodiscard]] const std::string& cause() const { return cause_; }
  [[nodiscard]] int num_failures() const { return num_failures_; }

 private:
  int world_rank_;
  std::uint32_t node_id_;
  std::int64_t pid_;
  std::string cause_;
  int num_failures_;
};

}  // namespace sray::train
