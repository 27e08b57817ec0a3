#pragma once

// A step's record on a node, for when nothing of the step is left to clean up
// after it: the node crashed and came back, or its slurmstepd was killed (the
// OOM killer, an admin's kill -9). The slurmstepd that prepares a sray step
// writes one, as root, as soon as the node's session directory exists (while
// its environment may still be staged), removes it when the preparation
// failed and took its session directory away, and removes it once the
// step's teardown on the node succeeded. A record whose daemon no longer runs
// (its pid is gone, or runs a process that started at another time) names a
// step whose processes, session directory and /dev/shm files nobody removed;
// the node's slurmd start, the next sray step's start and any step's end on
// the node remove them (spank/remote_context).
//
// Records live in <state directory>/<node name>, both private to root: the
// sweep ends processes and removes files on their word. The node name keeps
// emulated nodes that share one machine apart.
//
// Thread-safety: plain functions; each record is written and removed by the
// one slurmstepd of its step, and a sweep that loses a race for a record to
// another finds it gone, which is not an error.

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace sray::jobsetup {

// In a node's record directory: the lock and outcome of the sweep at step
// ends (spank/remote_context); not a record (the sweep skips names that
// start with a dot).
inline constexpr const char* kStepEndSweepStamp = ".step-end-sweep";

struct StepRecord {
  // The slurmstepd that wrote the record, and when it started (ProcessStartTime).
  pid_t daemon_pid = 0;
  std::uint64_t daemon_start_time = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  std::string job_id;
  std::string step_id;
  std::uint32_t node_id = 0;
  std::filesystem::path session_directory;
};

std::string EncodeStepRecord(const StepRecord& record);
// Fails on anything EncodeStepRecord did not write, naming what was wrong.
Result<StepRecord> DecodeStepRecord(std::string_view bytes);

// "<job>.<step>": the record's file name.
std::string StepRecordName(std::string_view job_id, std::string_view step_id);

// Creates `state_directory` and its `node_name` subdirectory where missing,
// both mode 0700 and owned by the caller, refusing existing ones that are not
// (anyone who can write there could make the sweep remove what they name).
Result<std::filesystem::path> PrepareRecordDirectory(const std::filesystem::path& state_directory,
                                                     std::string_view node_name);

// Writes the record whole or not at all (mode 0600).
Status WriteStepRecord(const std::filesystem::path& directory, const StepRecord& record);
// Removes the record of job_id.step_id; a missing one is not an error.
Status RemoveStepRecord(const std::filesystem::path& directory, std::string_view job_id,
                        std::string_view step_id);

// Reads one record file; refuses one that is not a private regular file of
// the caller (not written by sray).
Result<StepRecord> ReadStepRecord(const std::filesystem::path& file);
// Whether the record's slurmstepd still runs (its pid, with its start time).
bool DaemonRuns(const StepRecord& record);

// A record whose daemon is gone; `record` holds why it could not be read
// when it is corrupt (such a file names nothing the sweep can act on).
struct StaleStepRecord {
  std::filesystem::path file;
  Result<StepRecord> record;
};
// The records in `directory` whose daemon no longer runs. Files still being
// written (*.tmp) are skipped; a missing directory has none.
Result<std::vector<StaleStepRecord>> FindStaleStepRecords(const std::filesystem::path& directory);

}  // namespace sray::jobsetup
