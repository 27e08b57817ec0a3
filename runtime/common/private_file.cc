#include "common/private_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

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

}  // namespace sray
