// A program whose exit is slow after sray's end: an atexit handler
// registered before sray::Init (so run after sray's Shutdown) sleeps 6 s.
// The test (tests/CMakeLists.txt, runtime.a_slow_exit_after_shutdown_is_named)
// expects the process to say on stderr that it is still exiting, and where:
// a job whose driver never exited after its work said nothing before.

#include <chrono>
#include <cstdlib>
#include <thread>

#include <sray/api.h>

int main(int argc, char** argv) {
  std::atexit([] { std::this_thread::sleep_for(std::chrono::seconds(6)); });
  sray::Init(argc, argv, sray::InitOptions{.local_mode = true});
  return 0;
}
