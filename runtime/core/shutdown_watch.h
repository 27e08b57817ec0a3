#pragma once

// Names the step of a job's end that is slow. Ending the job (Shutdown)
// waits on other threads, libraries and nodes; a job whose driver never
// ended after its work was done (seen on a GPU machine only) gave no clue
// which wait it was in. A step that has run longer than `patience` is named
// once on `say`, so that such a job says what it waits for. At log_level
// debug every step is logged as it starts.
//
// Thread-safety: Step is called by one thread (the one ending the job); the
// watch's own thread only reads what Step wrote, under the mutex.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace sray::core {

class ShutdownWatch {
 public:
  ShutdownWatch(std::chrono::milliseconds patience, std::function<void(const std::string&)> say);
  // Ends the watch: the last step is over.
  ~ShutdownWatch();
  ShutdownWatch(const ShutdownWatch&) = delete;
  ShutdownWatch& operator=(const ShutdownWatch&) = delete;

  // The step now running, as a phrase ("stopping the dashboard").
  void Step(std::string name);

 private:
  void Watch();

  const std::chrono::milliseconds patience_;
  const std::function<void(const std::string&)> say_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::string step_;                                    // guarded by mutex_
  std::chrono::steady_clock::time_point step_started_;  // guarded by mutex_
  std::uint64_t step_number_ = 0;                       // guarded by mutex_
  bool ended_ = false;                                  // guarded by mutex_
  std::thread thread_;                                  // last: starts once the members above exist
};

}  // namespace sray::core
