#pragma once

// What happened on a node that a person looking at the job wants to know
// (a worker process ended, and why; objects were spilled): the newest kEventsKept, for the
// dashboard's /api/events.
//
// Thread-safety: every member may be called from any thread.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
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

// Objects spilled to disk, told as events without flooding the log: the
// first spill after a quiet second at once, later ones added up and told at
// most once a second, or when the events are read (Flush).
//
// Thread-safety: every member may be called from any thread; Spilled is
// called under the object store's lock, and takes only its own.
class SpillEvents {
 public:
  SpillEvents(std::uint32_t node_id, std::shared_ptr<EventLog> events)
      : node_id_(node_id), events_(std::move(events)) {}

  void Spilled(std::uint64_t bytes) {
    std::lock_guard lock(mutex_);
    ++objects_;
    bytes_ += bytes;
    if (std::chrono::steady_clock::now() - last_told_ >= std::chrono::seconds(1)) TellLocked();
  }
  void Flush() {
    std::lock_guard lock(mutex_);
    if (objects_ > 0) TellLocked();
  }

 private:
  void TellLocked() {
    events_->Add("objects_spilled",
                 "node " + std::to_string(node_id_) + " spilled " + std::to_string(objects_) +
                     " object(s), " + std::to_string(bytes_) +
                     " bytes, to disk: its object store is full (object_store_memory=)");
    objects_ = 0;
    bytes_ = 0;
    last_told_ = std::chrono::steady_clock::now();
  }

  const std::uint32_t node_id_;
  const std::shared_ptr<EventLog> events_;
  std::mutex mutex_;
  std::uint64_t objects_ = 0;  // not yet told; guarded by mutex_
  std::uint64_t bytes_ = 0;
  std::chrono::steady_clock::time_point last_told_{};
};

}  // namespace sray::core
