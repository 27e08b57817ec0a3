#pragma once

// What happened on a node that a person looking at the job wants to know
// (a worker process ended, and why): the newest kEventsKept, for the
// dashboard's /api/events.
//
// Thread-safety: every member may be called from any thread.

#include <chrono>
#include <cstddef>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include <msgpack.hpp>

namespace sray::core {

struct Event {
  double unix_time = 0;
  std::string kind;  // "worker_exited", ...
  std::string message;
  MSGPACK_DEFINE(unix_time, kind, message)
};

class EventLog {
 public:
  static constexpr std::size_t kEventsKept = 200;

  void Add(std::string kind, std::string message) {
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    std::lock_guard lock(mutex_);
    if (events_.size() == kEventsKept) events_.pop_front();
    events_.push_back({.unix_time = now, .kind = std::move(kind), .message = std::move(message)});
  }
  [[nodiscard]] std::vector<Event> Recent() const {
    std::lock_guard lock(mutex_);
    return {events_.begin(), events_.end()};
  }

 private:
  mutable std::mutex mutex_;
  std::deque<Event> events_;
};

}  // namespace sray::core
