#pragma once

// Other threads' long UCX operations, which hold the UCX worker's lock for
// hundreds of microseconds (an endpoint's creation: unpacking the address,
// setting up TCP sockets, wire-up). A thread that wants the worker meanwhile
// spins on that lock: in perf of a 3-node start (bench/launch), a quarter of
// the progress thread's samples were in pthread_spin_lock, on 2 cores that
// the lock's holder needed. The progress thread waits for them parked
// instead (ProgressLoop).
//
// Thread-safety: every member may be called from any thread.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace sray::transport {

class LongOperations {
 public:
  // Counts one long operation for its lifetime.
  class Scope {
   public:
    explicit Scope(LongOperations& operations);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    LongOperations& operations_;
  };

  [[nodiscard]] bool any() const { return running_.load() > 0; }
  // Threads in WaitUntilNone (for tests).
  [[nodiscard]] int waiting() const { return waiting_.load(); }
  // Blocks until no long operation runs, or `limit` passed; true if none runs.
  bool WaitUntilNone(std::chrono::microseconds limit);

 private:
  std::atomic<int> running_{0};
  // A thread waits in WaitUntilNone: the last operation to end wakes it
  // (checked after the count drops, so no ending goes unnoticed).
  std::atomic<int> waiting_{0};
  std::mutex mutex_;
  std::condition_variable ended_;
};

}  // namespace sray::transport
