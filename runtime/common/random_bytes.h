#pragma once

// Fills memory from the kernel's random source (getrandom), for secrets:
// the job secret, the dashboard token, training's store prefix.
//
// Thread-safety: a pure function of the kernel.

#include <cstddef>
#include <span>
#include <string_view>

#include "common/status.h"

namespace sray {

// `what` names the secret in the error ("the job secret").
Status FillRandom(std::span<std::byte> bytes, std::string_view what);

}  // namespace sray
