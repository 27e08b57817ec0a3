#pragma once

// This machine's host name: the one answer to "which host is this" for
// every module (emulated nodes of `sray run` share it).
//
// Thread-safety: safe from any thread.

#include <string>
#include <string_view>

namespace sray {

// The name, or `fallback` when the system cannot say.
std::string HostName(std::string_view fallback = "localhost");

}  // namespace sray
