#pragma once

// The completion of one operation a thread waits for (a call's reply, a
// send, a pull). Shared between the waiting thread and the UCX callback that
// finishes it; the first Finish wins.
//
// Thread-safety: every member may be used from any thread.

#include <atomic>
#include <condition_variable>
#include <mutex>

#include "common/status.h"
#include "transport/bytes.h"

namespace sray::transport {

struct Completion {
  // Read without the lock by threads that poll; set under it.
  std::atomic<bool> done{false};
  std::mutex mutex;
  std::condition_variable changed;
  Status status;  // valid once done
  Bytes data;     // valid once done

  void Finish(Status final_status, Bytes final_data = {}) {
    {
      std::lock_guard lock(mutex);
      if (done.load(std::memory_order_relaxed)) return;
      status = std::move(final_status);
      data = std::move(final_data);
      done.store(true, std::memory_order_release);
    }
    changed.notify_all();
  }
};

}  // namespace sray::transport
