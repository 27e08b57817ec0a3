#pragma once

// Asked by long environment work (unpacking a pack, between files; a conda
// tool's creation, every 100 ms) whether its caller was interrupted (Ctrl-C
// to `sray run`): the work then stops, leaves nothing behind, and fails
// saying so. Called on the working thread; empty: never interrupted.

#include <functional>

namespace sray::envs {

using Interrupted = std::function<bool()>;

}  // namespace sray::envs
