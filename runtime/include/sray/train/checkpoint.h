#pragma once

// A checkpoint is a directory. A worker writes one and passes it to Report;
// rank 0's is copied into the run's storage as checkpoint_NNNNNN, atomically
// (a half-written checkpoint is never visible). After a restart each worker's
// GetCheckpoint() is a local copy of the latest one.

#include <optional>
#include <string>

#include <msgpack.hpp>

namespace sray::train {

class Checkpoint {
 public:
  Checkpoint() = default;
  // Throws sray::ConfigError when `path` is not a directory.
  static Checkpoint FromDirectory(const std::string& path);
  [[nodiscard]] const std::string& path() const { return path_; }

  MSGPACK_DEFINE(path_)

 private:
  explicit Checkpoint(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// The newest checkpoint_NNNNNN in a run directory (storage_path/name), to
// resume a run that ended; empty when there is none. Partial checkpoints
// left by a crash are never returned.
std::optional<Checkpoint> LatestCheckpoint(const std::string& run_directory);

}  // namespace sray::train
