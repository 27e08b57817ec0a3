#pragma once

// Runs closures one at a time, in order: the node manager's event loop.
// State touched only from its closures needs no lock. Closures run on the
// executor's own thread, or with RunHereOrPost on the calling thread when
// nothing else is queued or running (a strand): handing a small step to
// another thread costs a futex wake-up and two context switches, more than
// the step itself, and was a large share of a task's cost on 2 cores.
// Transport handlers post blocking work here, because they must not make
// blocking calls (sends) themselves.
//
// Thread-safety: Post and RunHereOrPost may be called from any thread,
// including from a closure; the destructor runs what was posted, then joins.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace sray::core {

class SerialExecutor {
 public:
  // `on_idle` runs whenever the queue empties; it returns how long to sleep
  // before calling it again if nothing is posted (zero: until something is).
  using IdleHandler = std::function<std::chrono::milliseconds()>;
  explicit SerialExecutor(IdleHandler on_idle = {}) : on_idle_(std::move(on_idle)) {
    thread_ = std::thread([this] { Run(); });
  }
  ~SerialExecutor() { Stop(); }
  SerialExecutor(const SerialExecutor&) = delete;
  SerialExecutor& operator=(const SerialExecutor&) = delete;

  void Post(std::function<void()> work) {
    bool wake = false;
    {
      std::lock_guard lock(mutex_);
      if (stopped_) return;
      queue_.push_back(std::move(work));
      // Whoever runs now drains the queue before it stops.
      wake = !running_;
    }
    if (wake) wake_.notify_one();
  }

  // Runs `work` here and now if nothing runs, then whatever was queued
  // meanwhile and the idle handler, as the thread would; if something runs,
  // queues `work` for it. Only for work that does not block: it may run
  // inside a transport handler.
  template <typename Work>
  void RunHereOrPost(Work&& work) {
    {
      std::lock_guard lock(mutex_);
      if (stopped_) return;
      if (running_) {
        queue_.emplace_back(std::forward<Work>(work));
        return;
      }
      running_ = true;
    }
    InlineRun run(*this);
    work();
  }

  // Runs what is queued, then ends the thread. Idempotent; not from a closure.
  void Stop() {
    {
      std::lock_guard lock(mutex_);
      if (stopped_) return;
      stopped_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  // Finishes an inline run (also when the work throws): drains what was
  // queued meanwhile, runs the idle handler, and wakes the thread only when
  // that asked to be called again later while the thread sleeps without a
  // deadline.
  class InlineRun {
   public:
    explicit InlineRun(SerialExecutor& executor) : executor_(executor) {}
    ~InlineRun() {
      std::unique_lock lock(executor_.mutex_);
      std::chrono::milliseconds again{0};
      bool idle_handler_due = static_cast<bool>(executor_.on_idle_);
      while (true) {
        if (!executor_.queue_.empty()) {
          auto work = std::move(executor_.queue_.front());
          executor_.queue_.pop_front();
          lock.unlock();
          work();
          lock.lock();
          idle_handler_due = static_cast<bool>(executor_.on_idle_);
          continue;
        }
        if (!idle_handler_due) break;
        idle_handler_due = false;
        lock.unlock();
        again = executor_.on_idle_();
        lock.lock();
      }
      executor_.running_ = false;
      // Once: the thread, woken, then sleeps with the handler's deadline.
      const bool wake = again.count() > 0 && executor_.sleeping_untimed_;
      if (wake) {
        executor_.sleeping_untimed_ = false;
        executor_.idle_again_after_ = again;
      }
      lock.unlock();
      if (wake) executor_.wake_.notify_one();
    }
    InlineRun(const InlineRun&) = delete;
    InlineRun& operator=(const InlineRun&) = delete;

   private:
    SerialExecutor& executor_;
  };

  void Run() {
    std::unique_lock lock(mutex_);
    while (true) {
      if (!running_ && !queue_.empty()) {
        auto work = std::move(queue_.front());
        queue_.pop_front();
        running_ = true;
        lock.unlock();
        work();
        lock.lock();
        running_ = false;
        continue;
      }
      if (stopped_ && !running_) return;
      std::chrono::milliseconds again{0};
      if (running_) {
        // A caller runs closures inline; it drains the queue and runs the
        // idle handler itself. Look again later for the idle handler.
        again = kIdleRecheck;
      } else if (on_idle_) {
        running_ = true;
        lock.unlock();
        again = on_idle_();
        lock.lock();
        running_ = false;
        if (!queue_.empty() || stopped_) continue;
      }
      if (again.count() > 0) {
        wake_.wait_for(lock, again);
      } else {
        sleeping_untimed_ = true;
        wake_.wait(lock, [this] { return !queue_.empty() || stopped_ || !sleeping_untimed_; });
        sleeping_untimed_ = false;
        // An inline run asked for the handler later, not now: calling it at
        // once would run it before the moment it named.
        const auto later = std::exchange(idle_again_after_, std::chrono::milliseconds{0});
        if (later.count() > 0) {
          wake_.wait_for(lock, later, [this] { return !queue_.empty() || stopped_; });
        }
      }
    }
  }

  static constexpr std::chrono::milliseconds kIdleRecheck{2};

  IdleHandler on_idle_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stopped_ = false;
  bool running_ = false;  // a closure or the idle handler runs, here or inline
  // The thread waits for a post with no deadline; cleared (under the lock)
  // to have it call the idle handler again.
  bool sleeping_untimed_ = false;
  // What the idle handler asked for in the inline run that woke the thread.
  std::chrono::milliseconds idle_again_after_{0};
  std::thread thread_;
};

}  // namespace sray::core
