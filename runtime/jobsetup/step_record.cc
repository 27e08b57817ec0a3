#include "jobsetup/step_record.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <system_error>

#include "common/private_file.h"
#include "common/process_stat.h"
#include "jobsetup/field_codec.h"

namespace sray::jobsetup {
namespace {

constexpr std::string_view kVersion = "sray-step-record-1";
constexpr std::string_view kTemporarySuffix = ".tmp";

Status Corrupt(std::string_view what) {
  return Status::InvalidArgument("corrupt step record (" + std::string(what) + ")");
}

// Written by root into a root-only directory: a record owned by anyone else,
// or readable by them, was not written by sray and is not trusted.
Result<std::string> ReadRecordFile(const std::filesystem::path& file) {
  struct stat info {};
  if (::lstat(file.c_str(), &info) != 0) {
    return Status::IoError("cannot read " + file.string() + ": " + std::strerror(errno));
  }
  if (!S_ISREG(info.st_mode) || info.st_uid != ::geteuid() || (info.st_mode & 077) != 0) {
    return Status::PermissionDenied(
        file.string() + " is not a private regular file of this user: not written by sray");
  }
  std::ifstream stream(file, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(stream)), std::istreambuf_iterator<char>());
  if (stream.bad()) return Status::IoError("cannot read " + file.string());
  return bytes;
}

}  // namespace

std::string EncodeStepRecord(const StepRecord& record) {
  FieldWriter writer;
  writer.Field(kVersion);
  writer.Number(static_cast<std::uint64_t>(record.daemon_pid));
  writer.Number(record.daemon_start_time);
  writer.Number(record.uid);
  writer.Number(record.gid);
  writer.Number(record.groups.size());
  for (const gid_t group : record.groups) writer.Number(group);
  writer.Field(record.job_id);
  writer.Field(record.step_id);
  writer.Number(record.node_id);
  writer.Field(record.session_directory.string());
  return std::move(writer).Take();
}

Result<StepRecord> DecodeStepRecord(std::string_view bytes) {
  FieldReader reader(bytes);
  if (reader.Field() != kVersion) return Corrupt("unknown format");
  StepRecord record;
  const auto pid = reader.Number();
  const auto start_time = reader.Number();
  const auto uid = reader.Number32();
  const auto gid = reader.Number32();
  const auto group_count = reader.Number();
  if (!pid || *pid == 0 || *pid > INT32_MAX || !start_time || !uid || !gid || !group_count ||
      *group_count > reader.Remaining()) {
    return Corrupt("truncated daemon or user");
  }
  for (std::uint64_t i = 0; i < *group_count; ++i) {
    const auto group = reader.Number32();
    if (!group) return Corrupt("truncated groups");
    record.groups.push_back(*group);
  }
  auto job_id = reader.Field();
  auto step_id = reader.Field();
  const auto node_id = reader.Number32();
  auto session_directory = reader.Field();
  if (!job_id || !step_id || !node_id || !session_directory) return Corrupt("truncated step");
  if (!reader.AtEnd()) return Corrupt("trailing bytes");
  if (job_id->empty() || step_id->empty() || job_id->find('/') != std::string::npos ||
      step_id->find('/') != std::string::npos) {
    return Corrupt("bad job or step id");
  }
  const std::filesystem::path session(*session_directory);
  if (!session.is_absolute()) return Corrupt("session directory is not an absolute path");
  record.daemon_pid = static_cast<pid_t>(*pid);
  record.daemon_start_time = *start_time;
  record.uid = *uid;
  record.gid = *gid;
  record.job_id = std::move(*job_id);
  record.step_id = std::move(*step_id);
  record.node_id = *node_id;
  record.session_directory = session;
  return record;
}

std::string StepRecordName(std::string_view job_id, std::string_view step_id) {
  return std::string(job_id) + "." + std::string(step_id);
}

Result<std::filesystem::path> PrepareRecordDirectory(const std::filesystem::path& state_directory,
                                                     std::string_view node_name) {
  if (node_name.empty() || node_name.find('/') != std::string_view::npos || node_name == "." ||
      node_name == "..") {
    return Status::InvalidArgument("node name '" + std::string(node_name) +
                                   "' cannot name a directory of step records");
  }
  SRAY_RETURN_IF_ERROR(
      CreatePrivateDirectoryIn(state_directory, ::geteuid(), "sray state directory"));
  std::filesystem::path directory = state_directory / node_name;
  SRAY_RETURN_IF_ERROR(
      CreatePrivateDirectory(directory, ::geteuid(), "directory of this node's step records"));
  return directory;
}

Status WriteStepRecord(const std::filesystem::path& directory, const StepRecord& record) {
  return WritePrivateFile(directory / StepRecordName(record.job_id, record.step_id),
                          EncodeStepRecord(record));
}

Status RemoveStepRecord(const std::filesystem::path& directory, std::string_view job_id,
                        std::string_view step_id) {
  std::error_code error;
  std::filesystem::remove(directory / StepRecordName(job_id, step_id), error);
  if (error) {
    return Status::IoError("cannot remove the step record " +
                           (directory / StepRecordName(job_id, step_id)).string() + ": " +
                           error.message() + ": the next step on this node will try again");
  }
  return Status::Ok();
}

Result<StepRecord> ReadStepRecord(const std::filesystem::path& file) {
  auto bytes = ReadRecordFile(file);
  if (!bytes.ok()) return bytes.status();
  return DecodeStepRecord(*bytes);
}

bool DaemonRuns(const StepRecord& record) {
  return ProcessStartTime(record.daemon_pid) == record.daemon_start_time;
}

Result<std::vector<StaleStepRecord>> FindStaleStepRecords(const std::filesystem::path& directory) {
  std::vector<StaleStepRecord> stale;
  std::error_code error;
  std::filesystem::directory_iterator entries(directory, error);
  if (error == std::errc::no_such_file_or_directory) return stale;
  if (error) {
    return Status::IoError("cannot list the step records in " + directory.string() + ": " +
                           error.message());
  }
  for (const auto& entry : entries) {
    const std::filesystem::path file = entry.path();
    if (file.filename().string().ends_with(kTemporarySuffix)) continue;
    if (file.filename().string().starts_with("."))
      continue;  // the sweep's own (kStepEndSweepStamp)
    auto bytes = ReadRecordFile(file);
    if (!bytes.ok()) {
      if (bytes.status().code() == StatusCode::kIoError && !std::filesystem::exists(file)) continue;
      stale.push_back({file, bytes.status()});
      continue;
    }
    auto record = DecodeStepRecord(*bytes);
    if (record.ok() && DaemonRuns(*record)) continue;
    stale.push_back({file, std::move(record)});
  }
  return stale;
}

}  // namespace sray::jobsetup
