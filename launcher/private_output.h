#pragma once

// Whether what a process writes to a descriptor can be read by the job user
// alone: a terminal or a regular file that this user owns and that grants
// neither its group nor others read access. A pipe, a socket or anything
// else is not (who reads the other end is unknown). `sray run` decides with
// it whether the driver may print the dashboard's one-time login link.
//
// Thread-safety: pure queries of the descriptor.

#include <optional>
#include <string>

namespace sray::launcher {

bool DescriptorIsPrivate(int descriptor);

// `sray login`'s looser rule, where the user chose the output: pipes and
// terminals pass (`$(sray login)`), and so do files that root owns (root
// reads every file anyway: a wrapper run as root capturing the output). The
// name of a regular file others may read, or nothing.
std::optional<std::string> RegularFileOthersMayRead(int descriptor);

}  // namespace sray::launcher
