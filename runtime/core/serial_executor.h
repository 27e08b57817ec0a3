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

  // Runs `work` here and now if nothing runs or waits, then whatever was
  // queued meanwhile and the idle handler, as the thread would; otherwise
  // queues `work` behind the rest. Only for work that does not block: it may run
  // inside a transport handler.
  template <typename Work>
  void RunHereOrPost(Work&& work) {
    {
      std::lock_guard lock(mutex_);
      if (stopped_) return;
      // Work posted before and not yet taken (the thread is woken for it)
      // goes first: `work` queues behind it.
      if (running_ || !queue_.empty()) {
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
  // that asked to be called again before the thread would wake by itself
  // (with no deadline, or a later one).
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
      // A Stop meanwhile: the thread waits for this run to end.
      bool wake = executor_.stopped_ && executor_.sleeping_;
      if (again.count() > 0 && executor_.sleeping_) {
        const auto at = std::chrono::steady_clock::now() + again;
        if (at < executor_.wake_at_) {
          executor_.wake_at_ = at;
          wake = true;
        }
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
      SleepLocked(lock, again);
    }
  }

  // Sleeps until something is posted, or `again` from now (zero: no
  // deadline). An inline run may bring the wake-up forward (wake_at_), but
  // the idle handler is never called before the moment it named.
  void SleepLocked(std::unique_lock<std::mutex>& lock, std::chrono::milliseconds again) {
    wake_at_ = again.count() > 0 ? std::chrono::steady_clock::now() + again
                                 : std::chrono::steady_clock::time_point::max();
    sleeping_ = true;
    // While a caller runs closures inline, what it leaves queued is its to
    // run, and a Stop waits for it (the lock must be let go meanwhile).
    while (running_ || (!stopped_ && queue_.empty())) {
      if (wake_at_ == std::chrono::steady_clock::time_point::max()) {
        wake_.wait(lock);
      } else if (wake_.wait_until(lock, wake_at_) == std::cv_status::timeout &&
                 std::chrono::steady_clock::now() >= wake_at_) {
        break;
      }
    }
    sleeping_ = false;
  }

  static constexpr std::chrono::milliseconds kIdleRecheck{2};

  IdleHandler on_idle_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stopped_ = false;
  bool running_ = false;  // a closure or the idle handler runs, here or inline
  // The thread sleeps (SleepLocked) until wake_at_ (max: until a post).
  bool sleeping_ = false;
  std::chrono::steady_clock::time_point wake_at_ = std::chrono::steady_clock::time_point::max();
  std::thread thread_;
};

}  // namespace sray::core
