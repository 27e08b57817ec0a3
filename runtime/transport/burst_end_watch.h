#pragma once

// Tells when a burst of messages has ended, so that a process can hand back
// the memory the burst left in caches (the allocator's per-thread caches,
// block pools' kept chunks, pages freed but not yet returned).
//
// jemalloc returns freed pages over its 10 s decay, but only while the
// process allocates; block pools decide what to keep when a block is freed.
// A process that goes idle right after a burst therefore kept what the burst
// left: a driver after 20,000 tasks, 24 MiB more than at its start, for as
// long as it stayed idle (docs/reliability.md, Load).
//
// The count of messages served is read once per window of kWindow (at
// least). A burst has ended at the first window with fewer than a sixteenth
// of the busiest window since the last end, if that busiest one had at least
// kBurstMessages: heartbeats and other background traffic keep coming
// meanwhile (the head hears from every node twice a second), and a burst
// that begins late in a window still counts in full in the next. Then, for
// kDecayFor and as long as windows stay under kBurstMessages, every window
// says "quiet", for the allocator's decay to be driven while the process
// allocates too little to drive it.
//
// Thread-safety: none; one per progress loop, used by its thread.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>

namespace sray::transport {

class BurstEndWatch {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kWindow{1000};
  static constexpr std::uint64_t kBurstMessages = 1000;
  static constexpr std::uint64_t kQuietFraction = 16;
  // jemalloc's default decay time (10 s) and a margin.
  static constexpr std::chrono::seconds kDecayFor{12};

  enum class Moment {
    kNothing,     // busy, or long quiet: nothing to hand back
    kBurstEnded,  // once per burst
    kQuiet,       // within kDecayFor of a burst's end, once per window
  };

  BurstEndWatch(Clock::time_point now, std::uint64_t messages)
      : window_start_(now), messages_at_window_start_(messages) {}

  // `messages`: the count of messages served so far (never decreasing).
  Moment Observe(Clock::time_point now, std::uint64_t messages) {
    if (now - window_start_ < kWindow) return Moment::kNothing;
    const std::uint64_t in_window = messages - messages_at_window_start_;
    window_start_ = now;
    messages_at_window_start_ = messages;
    busiest_window_ = std::max(busiest_window_, in_window);
    if (busiest_window_ >= kBurstMessages && in_window * kQuietFraction < busiest_window_) {
      busiest_window_ = in_window;
      ended_at_ = now;
      return Moment::kBurstEnded;
    }
    // Traffic again: jemalloc decays by itself while the process allocates.
    if (in_window >= kBurstMessages) ended_at_.reset();
    if (ended_at_ && now - *ended_at_ <= kDecayFor) return Moment::kQuiet;
    ended_at_.reset();
    return Moment::kNothing;
  }

 private:
  Clock::time_point window_start_;
  std::uint64_t messages_at_window_start_;
  // The busiest window since the last burst ended (or since the start).
  std::uint64_t busiest_window_ = 0;
  std::optional<Clock::time_point> ended_at_;
};

}  // namespace sray::transport
