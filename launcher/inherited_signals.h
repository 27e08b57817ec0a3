#pragma once

// What the launcher's caller had SIGHUP set to when it started us (nohup
// ignores it). UCX's library initializer installs a SIGHUP handler of its own
// (its debug signal) before main runs, so by then the ignore is gone: the
// launcher's executable records it from its .preinit_array, which runs before
// any shared library's initializer (launcher/main.cc).
//
// Thread-safety: RecordInheritedSignals runs once, before any thread exists;
// the query only reads afterwards.

namespace sray::launcher {

void RecordInheritedSignals();

// True when SIGHUP was ignored at exec. Where nothing was recorded (a
// program other than `sray` linking the launcher's library), whether it is
// ignored now.
bool HangUpIgnoredAtStart();

}  // namespace sray::launcher
