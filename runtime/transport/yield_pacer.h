#pragma once

// How often a thread that polls for messages yields its core.
//
// A yield lets the other threads of the node run between messages, but it
// is a system call, and a message that arrives meanwhile waits for it. On a
// VM where sched_yield took 1.3-1.6 us (2026-12-05; ucx_perftest's 8-byte
// latency there 0.6 us), yielding once in 16 empty polls kept the polling
// thread in the system call about half the time, and an 8-byte call took 3x
// perftest's; yielding once in 20 us brought that to 2x, but the actor-call
// rates of the runtime on 2 cores, where other processes wait for the core,
// fell by up to a quarter.
//
// So the pacer adapts: a yield that came back at once (no other thread
// wanted the core) doubles the interval to the next, up to kLongest; a yield
// that took longer (another thread ran) brings it back to kShortest.
//
// Thread-safety: none; one per polling loop, used by its thread.

#include <algorithm>
#include <chrono>
#include <thread>

namespace sray::transport {

class YieldPacer {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::nanoseconds kShortest = std::chrono::microseconds(2);
  static constexpr std::chrono::nanoseconds kLongest = std::chrono::microseconds(50);
  // A yield that took longer than this gave the core to another thread: an
  // empty one is a system call of at most a few microseconds.
  static constexpr std::chrono::nanoseconds kGaveTheCoreAway = std::chrono::microseconds(4);

  // `yield` and `now` are replaceable for tests.
  explicit YieldPacer(
      Clock::time_point start, void (*yield)() = +[] { std::this_thread::yield(); },
      Clock::time_point (*now)() = +[] { return Clock::now(); })
      : yield_(yield), now_(now), next_(start + kShortest) {}

  // The thread comes back to polling after sleeping or running other work:
  // the next yield is one interval from now (what it learned is kept), not
  // at once, just as messages may be arriving.
  void Restart(Clock::time_point now) { next_ = now + interval_; }

  // Yields if the interval since the last yield has passed; `now` is the
  // caller's own clock reading.
  void MaybeYield(Clock::time_point now) {
    if (now < next_) return;
    yield_();
    const Clock::time_point after = now_();
    interval_ = after - now > kGaveTheCoreAway ? kShortest : std::min(interval_ * 2, kLongest);
    next_ = after + interval_;
  }

  [[nodiscard]] std::chrono::nanoseconds interval() const { return interval_; }

 private:
  void (*yield_)();
  Clock::time_point (*now_)();
  std::chrono::nanoseconds interval_ = kShortest;
  Clock::time_point next_;
};

}  // namespace sray::transport
