#pragma once

// One thread that runs posted closures in order: the node manager's and the
// worker's event loop. State touched only from its closures needs no lock.
// Transport handlers post here, because they must not make blocking calls
// (sends) themselves.
//
// Thread-safety: Post may be called from any thread, including from a
// closure; the destructor runs what was posted, then joins.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

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
    {
      std::lock_guard lock(mutex_);
      if (stopped_) return;
      queue_.push_back(std::move(work));
    }
    wake_.notify_one();
  }

  [[nodiscard]] bool OnExecutorThread() const { return std::this_thread::get_id() == thread_.get_id(); }

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
  void Run() {
    std::unique_lock lock(mutex_);
    while (true) {
      if (queue_.empty()) {
        if (stopped_) return;
        std::chrono::milliseconds again{0};
        if (on_idle_) {
          lock.unlock();
          again = on_idle_();
          lock.lock();
          if (!queue_.empty() || stopped_) continue;
        }
        if (again.count() > 0) {
          wake_.wait_for(lock, again);
        } else {
          wake_.wait(lock, [this] { return !queue_.empty() || stopped_; });
        }
        continue;
      }
      auto work = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      work();
      lock.lock();
    }
  }

  IdleHandler on_idle_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  bool stopped_ = false;
  std::thread thread_;
};

}  // namespace sray::core
