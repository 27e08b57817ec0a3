#pragma once

// Checkpoints on disk: a directory read into memory (to travel from a worker
// to the driver through the object store), or, where the worker's node sees
// the run directory (a shared file system, or the driver's own node), copied
// by the worker into a staged directory there, which the driver only renames
// from; written back elsewhere; and stored in a run directory atomically as
// checkpoint_NNNNNN: the files go to a hidden partial directory first, are
// synced, and the directory is renamed into place, so a crash at any point
// leaves the previous checkpoints and at most partial or staged directories
// that are never listed (and are removed at the next start). Free of
// LibTorch; not thread-safe per run directory (the driver alone stores
// there; workers only stage, each under a name of its own).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <msgpack.hpp>

#include "common/status.h"
#include "sray/train/config.h"

namespace sray::train::internal {

struct CheckpointFile {
  std::string path;  // relative to the checkpoint directory; a directory ends in '/'
  std::uint32_t mode = 0;
  std::string data;
  MSGPACK_DEFINE(path, mode, data)
};

struct CheckpointFiles {
  std::vector<CheckpointFile> files;
  MSGPACK_DEFINE(files)
};

// The largest file a checkpoint read into memory may hold: a report travels
// as one msgpack message, whose strings stop short of 4 GiB. Staged parts
// have no such limit.
inline constexpr std::uint64_t kLargestCheckpointFileBytes = (std::uint64_t{1} << 32U) - 1;

// A checkpoint part as the driver receives it from a worker: its files, or
// the name (in the run directory) of the directory the worker staged them in.
struct CheckpointPart {
  CheckpointFiles files;
  std::string staged;  // empty: the part is `files`
};

// The driver writes a token of its own into the run directory
// (kStorageMarkerName); a worker whose node reads the same token there sees
// the same directory, and stages its checkpoints there instead of sending
// them. A different directory under the same path on another host (a
// node-local /tmp) holds no such token.
inline constexpr std::string_view kStorageMarkerName = ".sray_storage_marker";
Status WriteStorageMarker(const std::string& run_directory, const std::string& token);
bool SeesStorageMarker(const std::string& run_directory, const std::string& token);
Status RemoveStorageMarker(const std::string& run_directory);

// Copies the checkpoint directory `from` into `run_directory` as a staged
// part named after `label` (letters, digits, '_' and '-'), each file and
// directory synced, and returns the part's name there. The same refusals as
// ReadCheckpointDirectory (links, devices), but no size limit.
sray::Result<std::string> StageCheckpointDirectory(const std::string& from,
                                                   const std::string& run_directory,
                                                   const std::string& label);
// Copies the checkpoint directory `from` into `to` (which must not exist),
// with the same refusals: a worker's restore copy read straight from storage.
Status CopyCheckpointDirectory(const std::string& from, const std::string& to);

// Regular files and directories only: a symlink or device is refused by
// name, and a file over kLargestCheckpointFileBytes by its size, before it
// is read.
sray::Result<CheckpointFiles> ReadCheckpointDirectory(const std::string& directory);
// Creates `directory` (which must not exist) with the files; paths that
// would leave it ("..", absolute) are refused.
Status WriteCheckpointDirectory(const CheckpointFiles& files, const std::string& directory);

std::string CheckpointDirectoryName(std::uint64_t index);  // checkpoint_000012

struct StoredCheckpoint {
  std::uint64_t index = 0;
  std::string path;
};
// The run directory's complete checkpoints, oldest (lowest index) first.
std::vector<StoredCheckpoint> ListCheckpoints(const std::string& run_directory);
// Removes partial directories a crashed writer left, and staged parts no
// store took (their report never completed, or their worker was killed
// while it staged).
Status RemovePartialCheckpoints(const std::string& run_directory);

// Writes checkpoint `index` into the run directory atomically and returns its
// path. `after_each_file`, for tests, runs after each file is written.
sray::Result<std::string> StoreCheckpoint(const std::string& run_directory, std::uint64_t index,
                                    const CheckpointFiles& files,
                                    const std::function<void()>& after_each_file = {});
// The same for a checkpoint made of parts several workers reported with the
// same Report (rank order, rank 0 first): every file of every part, as in Ray
// Train; where two parts hold the same path, or a later part's file would sit
// under an earlier part's file, the earlier part's entry is kept. The files
// of staged parts are moved (renamed) into it, never read.
// The staged parts' directories are gone afterwards, whatever the outcome.
sray::Result<std::string> StoreCheckpointParts(const std::string& run_directory,
                                               std::uint64_t index,
                                               std::vector<CheckpointPart> parts,
                                               const std::function<void()>& after_each_file = {});
Status RemoveCheckpoint(const std::string& path);

// A stored checkpoint and the metrics reported with it.
struct RankedCheckpoint {
  std::uint64_t index = 0;
  Metrics metrics;
};
// The checkpoints (given oldest first) that num_to_keep lets go: ranked by
// score_attribute in score_order, or by age; the latest is always kept, and
// a checkpoint whose metrics lack the score attribute ranks last.
std::vector<std::uint64_t> CheckpointsToRemove(const std::vector<RankedCheckpoint>& checkpoints,
                                               const CheckpointConfig& config);
// The same checkpoints, best first (newest first without a score attribute).
std::vector<RankedCheckpoint> BestFirst(std::vector<RankedCheckpoint> checkpoints,
                                        const CheckpointConfig& config);
// Refuses a score_order other than "max"/"min" and a negative num_to_keep.
Status ValidateCheckpointConfig(const CheckpointConfig& config);

}  // namespace sray::train::internal
