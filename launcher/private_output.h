#pragma once

// Whether what a process writes to a descriptor can be read by the job user
// alone: a terminal or a regular file that this user owns and that grants
// neither its group nor others read access. A pipe, a socket or anything
// else is not (who reads the other end is unknown). `sray run` decides with
// it whether the driver may print the dashboard's one-time login link.
//
// Thread-safety: a pure query of the descriptor.

namespace sray::launcher {

bool DescriptorIsPrivate(int descriptor);

}  // namespace sray::launcher
