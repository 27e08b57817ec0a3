#include "core/shutdown_watch.h"

#include <sstream>

#include "common/log.h"

namespace sray::core {

ShutdownWatch::ShutdownWatch(std::chrono::milliseconds patience,
                             std::function<void(const std::string&)> say)
    : patience_(patience), say_(std::move(say)), thread_([this] { Watch(); }) {}

ShutdownWatch::~ShutdownWatch() {
  Log(LogLevel::kDebug, "ending the job: done");
  {
    std::lock_guard lock(mutex_);
    ended_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void ShutdownWatch::Step(std::string name) {
  Log(LogLevel::kDebug, "ending the job: " + name);
  {
    std::lock_guard lock(mutex_);
    step_ = std::move(name);
    step_started_ = std::chrono::steady_clock::now();
    ++step_number_;
  }
  changed_.notify_all();
}

void ShutdownWatch::Watch() {
  std::unique_lock lock(mutex_);
  std::uint64_t named = 0;  // the step last named, so that each is named once
  while (!ended_) {
    if (step_number_ == 0 || step_number_ == named) {
      changed_.wait(lock);
      continue;
    }
    const std::uint64_t step = step_number_;
    const auto due = step_started_ + patience_;
    if (changed_.wait_until(lock, due, [&] { return ended_ || step_number_ != step; })) continue;
    named = step;
    std::ostringstream message;
    message
        << "sray: ending the job: " << step_ << " has taken "
        << std::chrono::duration<double>(patience_).count()
        << " s so far: if the job does not end, it waits there; end it with Ctrl-C (or scancel) "
           "and report this line";
    lock.unlock();
    say_(message.str());
    lock.lock();
  }
}

}  // namespace sray::core
