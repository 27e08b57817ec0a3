#include "common/random_bytes.h"

#include <sys/random.h>

#include <cerrno>
#include <string>

namespace sray {

Status FillRandom(std::span<std::byte> bytes, std::string_view what) {
  std::size_t filled = 0;
  while (filled < bytes.size()) {
    const ssize_t got = ::getrandom(bytes.data() + filled, bytes.size() - filled, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return Status::FromErrno(errno, "cannot create " + std::string(what));
    }
    filled += static_cast<std::size_t>(got);
  }
  return Status::Ok();
}

}  // namespace sray
