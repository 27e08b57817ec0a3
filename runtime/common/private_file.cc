#include "common/private_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <system_error>

namespace sray {

Status WritePrivateFile(const std::filesystem::path& path, std::string_view text) {
  const std::filesystem::path temporary = path.string() + ".tmp";
  const int descriptor =
      ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (descriptor < 0) return Status::FromErrno(errno, "create " + temporary.string());
  while (!text.empty()) {
    const ssize_t written = ::write(descriptor, text.data(), text.size());
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      const int write_error = written < 0 ? errno : EIO;
      ::close(descriptor);
      ::unlink(temporary.c_str());
      return Status::FromErrno(write_error, "write " + temporary.string());
    }
    text.remove_prefix(static_cast<std::size_t>(written));
  }
  ::close(descriptor);
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int rename_error = errno;
    ::unlink(temporary.c_str());
    return Status::FromErrno(rename_error, "rename to " + path.string());
  }
  return Status::Ok();
}

namespace {

// Creates `path` 0700, or checks the existing one: `adopt` accepts (and
// narrows) a directory of `owner` that no group or other user may write.
Status MakeOrCheckPrivateDirectory(const std::filesystem::path& path, uid_t owner,
                                   std::string_view what, bool adopt) {
  const std::string named = std::string(what) + " " + path.string();
  if (::mkdir(path.c_str(), 0700) == 0) {
    // mkdir honours the umask; 0700 needs no widening, but make it exact.
    if (::chmod(path.c_str(), 0700) != 0) {
      return Status::FromErrno(errno, "cannot set mode 0700 on " + named);
    }
    return Status::Ok();
  }
  const int mkdir_error = errno;
  if (mkdir_error != EEXIST) return Status::FromErrno(mkdir_error, "cannot create " + named);
  struct stat info {};
  if (::lstat(path.c_str(), &info) != 0) {
    return Status::FromErrno(errno, "cannot inspect existing " + named);
  }
  if (adopt) {
    const bool directory = S_ISDIR(info.st_mode);
    const bool owned = info.st_uid == owner;
    if (!directory || !owned || (info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
      const std::string why =
          !directory ? "it is not a directory"
          : !owned   ? "it belongs to uid " + std::to_string(info.st_uid) + ", not to this user"
                     : "other users may write into it";
      return Status::PermissionDenied("refusing the " + named + ": " + why +
                                      ": remove it, or choose another directory");
    }
    if ((info.st_mode & 07777) != 0700 && ::chmod(path.c_str(), 0700) != 0) {
      return Status::FromErrno(errno, "cannot set mode 0700 on " + named);
    }
    return Status::Ok();
  }
  const bool ours = S_ISDIR(info.st_mode) && info.st_uid == owner && (info.st_mode & 07777) == 0700;
  if (!ours) {
    return Status::AlreadyExists(
        named +
        " already exists and is not a mode-0700 directory of this user: refusing to use it; "
        "ask an administrator to remove it");
  }
  return Status::Ok();
}

Status MakePrivateDirectoryIn(const std::filesystem::path& path, uid_t owner, std::string_view what,
                              bool adopt) {
  std::error_code error;
  std::filesystem::create_directories(path.parent_path(), error);
  if (error) {
    return Status::IoError("cannot create the parent of the " + std::string(what) + " " + path.string() + ": " +
                           error.message());
  }
  return MakeOrCheckPrivateDirectory(path, owner, what, adopt);
}

}  // namespace

Status CreatePrivateDirectory(const std::filesystem::path& path, uid_t owner,
                              std::string_view what) {
  return MakeOrCheckPrivateDirectory(path, owner, what, /*adopt=*/false);
}

Status CreatePrivateDirectoryIn(const std::filesystem::path& path, uid_t owner,
                                std::string_view what) {
  return MakePrivateDirectoryIn(path, owner, what, /*adopt=*/false);
}

Status AdoptPrivateDirectoryIn(const std::filesystem::path& path, uid_t owner,
                               std::string_view what) {
  return MakePrivateDirectoryIn(path, owner, what, /*adopt=*/true);
}

}  // namespace sray
