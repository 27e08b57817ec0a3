#include "jobsetup/session_directory.h"

#include <algorithm>
#include <system_error>

#include "common/private_file.h"

namespace sray::jobsetup {
namespace {

bool IsSafeIdentifier(const std::string& text) {
  return !text.empty() && text.size() <= 64 && std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

}  // namespace

Result<std::filesystem::path> SessionDirectoryPath(const std::filesystem::path& base,
                                                   const SessionIdentity& identity) {
  if (!base.is_absolute()) {
    return Status::InvalidArgument("session directory base '" + base.string() +
                                   "' is not absolute: set tmpdir= to an absolute path");
  }
  if (!IsSafeIdentifier(identity.job_id) || !IsSafeIdentifier(identity.step_id)) {
    return Status::InvalidArgument("job id '" + identity.job_id + "' or step id '" +
                                   identity.step_id +
                                   "' is not a plain identifier: this is a bug in the launcher, "
                                   "please report it");
  }
  std::string name =
      "sray-" + std::to_string(identity.uid) + "-" + identity.job_id + "." + identity.step_id;
  if (identity.node_id) name += ".node" + std::to_string(*identity.node_id);
  return base / name;
}

Status CreateSessionDirectory(const std::filesystem::path& path, uid_t owner) {
  Status created = CreatePrivateDirectory(path, owner, "session directory");
  if (!created.ok() && created.code() != StatusCode::kAlreadyExists) {
    return created.WithRemedy("set tmpdir= to an existing, writable node-local directory");
  }
  return created;
}

Status RemoveSessionDirectory(const std::filesystem::path& path) {
  std::error_code error;
  std::filesystem::remove_all(path, error);
  if (error && error != std::errc::no_such_file_or_directory) {
    return Status::IoError("cannot remove session directory " + path.string() + ": " +
                           error.message() + ": remove it by hand");
  }
  return Status::Ok();
}

}  // namespace sray::jobsetup
