#include "jobsetup/session_directory.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

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
  if (::mkdir(path.c_str(), 0700) == 0) {
    // mkdir honours the umask; 0700 needs no widening, but make it exact.
    if (::chmod(path.c_str(), 0700) != 0) {
      return Status::FromErrno(errno, "cannot set mode 0700 on session directory " + path.string());
    }
    return Status::Ok();
  }
  const int mkdir_error = errno;
  if (mkdir_error != EEXIST) {
    return Status::FromErrno(mkdir_error, "cannot create session directory " + path.string())
        .WithRemedy("set tmpdir= to an existing, writable node-local directory");
  }
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) {
    return Status::FromErrno(errno, "cannot inspect existing session directory " + path.string());
  }
  const bool ours = S_ISDIR(info.st_mode) && info.st_uid == owner && (info.st_mode & 07777) == 0700;
  if (!ours) {
    return Status::AlreadyExists(
        "session directory " + path.string() +
        " already exists and is not a mode-0700 directory of this user: refusing to use it; "
        "ask an administrator to remove it");
  }
  return Status::Ok();
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
