#include "private_output.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

namespace sray::launcher {
namespace {

bool NeitherGroupNorOthersRead(const struct stat& status) {
  return (status.st_mode & (S_IRGRP | S_IROTH)) == 0;
}

}  // namespace

bool DescriptorIsPrivate(int descriptor) {
  struct stat status {};
  if (::fstat(descriptor, &status) != 0) return false;
  const bool terminal = S_ISCHR(status.st_mode) && ::isatty(descriptor) == 1;
  if (!terminal && !S_ISREG(status.st_mode)) return false;
  // A terminal's device belongs to the user logged in on it (mode 0620:
  // its group may write, never read); a file must be the user's alone.
  return status.st_uid == ::geteuid() && NeitherGroupNorOthersRead(status);
}

std::optional<std::string> RegularFileOthersMayRead(int descriptor) {
  struct stat status {};
  if (::fstat(descriptor, &status) != 0 || !S_ISREG(status.st_mode)) return std::nullopt;
  const bool owners_own = status.st_uid == ::geteuid() || status.st_uid == 0;
  if (owners_own && NeitherGroupNorOthersRead(status)) return std::nullopt;
  std::error_code error;
  const auto name =
      std::filesystem::read_symlink("/proc/self/fd/" + std::to_string(descriptor), error);
  return error ? std::string("descriptor ") + std::to_string(descriptor) : name.string();
}

}  // namespace sray::launcher
