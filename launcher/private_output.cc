#include "private_output.h"

#include <sys/stat.h>
#include <unistd.h>

namespace sray::launcher {

bool DescriptorIsPrivate(int descriptor) {
  struct stat status {};
  if (::fstat(descriptor, &status) != 0) return false;
  const bool terminal = S_ISCHR(status.st_mode) && ::isatty(descriptor) == 1;
  if (!terminal && !S_ISREG(status.st_mode)) return false;
  // A terminal's device belongs to the user logged in on it (mode 0620:
  // its group may write, never read); a file must be the user's alone.
  return status.st_uid == ::geteuid() && (status.st_mode & (S_IRGRP | S_IROTH)) == 0;
}

}  // namespace sray::launcher
