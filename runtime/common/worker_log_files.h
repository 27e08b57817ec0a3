#pragma once

// Where a node keeps what its workers printed, written by the node manager
// (core/worker_output) and read by the dashboard and by `sray logs`, also
// after the job from a `log_dir=` copy: one file per worker,
// DIRECTORY/worker-RANK.log, and the one before it, worker-RANK.log.1, once
// it outgrew its limit.
//
// Thread-safety: plain functions over the file system; they block on it.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/status.h"

namespace sray {

std::filesystem::path WorkerLogPath(const std::filesystem::path& directory, std::uint32_t rank);

struct WorkerLogFile {
  std::uint32_t rank = 0;
  std::uint64_t size = 0;
};
// The current log files in `directory`, by rank; none when it is missing.
std::vector<WorkerLogFile> ListWorkerLogs(const std::filesystem::path& directory);

struct WorkerLogChunk {
  std::uint64_t offset = 0;  // where `data` starts in the file
  std::uint64_t size = 0;    // of the whole file now
  std::string data;
};
// Up to `max_bytes` of worker `rank`'s log from `offset` (negative: its
// last `max_bytes`); NotFound when it has none.
Result<WorkerLogChunk> ReadWorkerLog(const std::filesystem::path& directory, std::uint32_t rank,
                                     std::int64_t offset, std::uint64_t max_bytes);

// Copies every log file of `from` (the rotated ones too) into `to`, made
// with mode 0700 if missing; the copies are 0600 (only the job user reads
// them, whatever the shared directory allows).
Status CopyWorkerLogs(const std::filesystem::path& from, const std::filesystem::path& to);

}  // namespace sray
