// The dashboard server stops where shutdown() does not wake a thread blocked
// in accept() (gVisor, the sandbox of some GPU clouds, behaves so; on Linux a
// close() alone does not wake it either). That behaviour is emulated here:
// this executable defines shutdown(), which the dynamic linker binds any call
// of the server's to, and while the test asks, it does nothing. (The server
// that cpp-httplib gave once stopped by shutdown(); the project's own wakes its
// poll() with an eventfd, and this test keeps it from coming to rely on
// shutdown() again.) Its own executable, so that no other test runs with the
// stand-in.

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <iostream>
#include <utility>

#include "dashboard/dashboard_server.h"

namespace {
std::atomic<bool> shutdown_wakes_nobody{false};
}  // namespace

// NOLINTNEXTLINE(readability-identifier-naming): the C library's name
extern "C" int shutdown(int socket, int how) noexcept {
  if (shutdown_wakes_nobody.load()) return 0;
  using Shutdown = int (*)(int, int);
  static const auto real = reinterpret_cast<Shutdown>(::dlsym(RTLD_NEXT, "shutdown"));
  return real(socket, how);
}

namespace sray::dashboard {
namespace {

TEST(DashboardStop, EndsWhenShutdownDoesNotWakeTheAcceptingThread) {
  DashboardOptions options;
  options.token = "secret";
  auto server = DashboardServer::Start(std::move(options));
  ASSERT_TRUE(server.ok()) << server.status().message();
  shutdown_wakes_nobody.store(true);
  auto stopped = std::async(std::launch::async, [&server] { server->reset(); });
  const bool ended = stopped.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  shutdown_wakes_nobody.store(false);
  if (!ended) {
    // The server's thread cannot be joined: leave at once, failing.
    std::cerr
        << "the dashboard server did not stop within 5 s: its accepting thread waits for ever\n";
    std::_Exit(1);
  }
}

}  // namespace
}  // namespace sray::dashboard
