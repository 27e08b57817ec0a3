#include "core/worker_reuse.h"

#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

namespace sray::core {

ProcessSnapshot TakeProcessSnapshot() {
  ProcessSnapshot snapshot;
  std::error_code error;
  for (std::filesystem::directory_iterator task("/proc/self/task", error), end;
       !error && task != end; task.increment(error)) {
    ++snapshot.threads;
  }
  std::ifstream statm("/proc/self/statm");
  std::uint64_t size_pages = 0;
  std::uint64_t resident_pages = 0;
  if (statm >> size_pages >> resident_pages) {
    snapshot.resident_bytes = resident_pages * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  }
  return snapshot;
}

std::optional<std::string> WhyNotReusable(const ProcessSnapshot& before,
                                          const ProcessSnapshot& now, bool ends_with_actor) {
  if (ends_with_actor) return "code in it asked to end the process with its actor";
  if (now.threads == 0) return std::string("its threads cannot be counted (/proc/self/task)");
  if (now.threads > before.threads) {
    return std::to_string(now.threads - before.threads) + " thread(s) of the actor still run";
  }
  if (now.resident_bytes > before.resident_bytes + kReusableResidentGrowth) {
    return "it keeps " + std::to_string((now.resident_bytes - before.resident_bytes) >> 20) +
           " MiB more memory than before the actor";
  }
  return std::nullopt;
}

void RunWithin(std::chrono::milliseconds limit, const std::function<void()>& destroy) {
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  std::thread watchdog([&] {
    std::unique_lock lock(mutex);
    if (!finished.wait_for(lock, limit, [&] { return done; })) std::_Exit(1);
  });
  destroy();
  {
    std::lock_guard lock(mutex);
    done = true;
  }
  finished.notify_one();
  watchdog.join();
}

}  // namespace sray::core
