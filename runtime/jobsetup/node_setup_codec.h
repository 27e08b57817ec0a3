#pragma once

// NodeSetup as bytes, so a node can be prepared in a child process that runs
// as the job user while the parent (a root slurmstepd) keeps the result. The
// child's failure travels the same way, as a Status.
//
// Thread-safety: pure functions.

#include <string>
#include <string_view>

#include "common/status.h"
#include "jobsetup/node_setup.h"

namespace sray::jobsetup {

// The outcome of PrepareNode, set up or failed.
std::string EncodeNodeSetupResult(const Result<NodeSetup>& result);

// Fails on anything EncodeNodeSetupResult did not write (truncated, corrupt,
// another version), naming what was wrong; otherwise returns the encoded
// outcome, which may itself be the child's failure.
Result<NodeSetup> DecodeNodeSetupResult(std::string_view bytes);

}  // namespace sray::jobsetup
