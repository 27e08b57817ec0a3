#pragma once

// Names the calling thread as ps -L, top -H, gdb and perf show it, so that a
// user (or a profile) can tell sray's threads apart from the program's:
// "sray-progress" and the like instead of the program's name on each.
//
// Thread-safety: names only the calling thread.

#include <string>
#include <string_view>

namespace sray {

// Linux keeps 15 bytes of a thread's name: a longer `name` is cut there.
void NameThisThread(std::string_view name);

// The calling thread's name, as NameThisThread left it (empty when the
// system cannot say).
std::string ThisThreadName();

}  // namespace sray
