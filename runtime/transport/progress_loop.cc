#include "transport/progress_loop.h"

#include <poll.h>

#include "common/thread_name.h"
#include "transport/ucx_status.h"
#include "transport/yield_pacer.h"

namespace sray::transport {
namespace {

// A waiting caller polls the worker itself for this long without progress
// before it sleeps and leaves the work to the progress thread.
constexpr std::chrono::microseconds kSpinWithoutProgress{50};
// The progress thread wakes at least this often to notice shutdown.
constexpr int kPollTimeoutMilliseconds = 200;
// After activity the progress thread keeps polling this long before it
// sleeps, so a request that follows a reply closely is served without a
// wake-up (several microseconds each way).
constexpr std::chrono::microseconds kBusyPollAfterActivity{100};
// A caller waiting for its reply, and the progress thread polling, read the
// clock once in this many empty polls: on shared memory an empty poll takes
// about as long as a clock read, and clock reads were a quarter of the
// samples of a small-call loop (perf).
constexpr std::uint32_t kPollsPerClockRead = 8;
// How long the progress thread naps, parked, while a caller polls for its
// reply. A caller that gives up wakes it, so the nap delays nothing then; it
// bounds only how late the thread resumes after the last caller got its
// reply. Each wake-up costs the core the callers spin on: napping 20 us, the
// wake-ups took a fifth of a core and small-message latency was 1.3-2x
// (transport_bench latency, docs/benchmarks.md).
constexpr std::chrono::microseconds kNapWhileCallersWait{200};
// How often a parked progress thread looks again by itself, so a driving
// thread that went off to run long work (a worker's task) does not leave
// messages unread for longer.
constexpr std::chrono::microseconds kParkedRecheck{500};
// Bound on waiting out a cancelled request.
constexpr std::chrono::seconds kCancelledRequestWait{5};

thread_local bool tls_in_ucx_callback = false;
thread_local bool tls_on_progress_thread = false;
thread_local bool tls_driving_progress = false;

}  // namespace

bool InUcxCallback() {
  return tls_in_ucx_callback;
}
bool OnProgressThread() {
  return tls_on_progress_thread;
}
bool DrivingProgress() {
  return tls_driving_progress;
}

CallbackScope::CallbackScope() : previous_(tls_in_ucx_callback) {
  tls_in_ucx_callback = true;
}
CallbackScope::~CallbackScope() {
  tls_in_ucx_callback = previous_;
}

ProgressLoop::ProgressLoop(std::shared_ptr<UcxWorker> worker, Client& client,
                           LongOperations* long_operations)
    : worker_(std::move(worker)), client_(client), long_operations_(long_operations) {}

ProgressLoop::~ProgressLoop() {
  Stop();
}

Status ProgressLoop::Start() {
  SRAY_RETURN_IF_ERROR(FromUcs(ucp_worker_get_efd(worker_->handle(), &event_fd_),
                               "cannot get the UCX worker's event file descriptor"));
  thread_ = std::thread([this] {
    NameThisThread("sray-progress");
    Run();
  });
  return Status::Ok();
}

void ProgressLoop::Stop() {
  // Set even when the thread never started: Transport's shutdown keys on it.
  stopping_.store(true);
  if (!thread_.joinable()) return;
  ucp_worker_signal(worker_->handle());
  thread_.join();
}

void ProgressLoop::Signal() {
  ucp_worker_signal(worker_->handle());
}

void ProgressLoop::NoticePosted() {
  if (sleeping_.load()) {
    ucp_worker_signal(worker_->handle());
  } else if (!tls_driving_progress) {
    UnparkProgressThread();
  }
}

void ProgressLoop::UnparkProgressThread() {
  if (!parked_.load()) return;
  std::lock_guard lock(park_mutex_);
  park_changed_.notify_one();
}

ProgressLoop::ReplyExpected::ReplyExpected(ProgressLoop& loop) : loop_(&loop) {
  loop_->spinning_waiters_.fetch_add(1);
}

ProgressLoop::ReplyExpected::~ReplyExpected() {
  if (loop_ == nullptr) return;
  loop_->spinning_waiters_.fetch_sub(1);
  loop_->UnparkProgressThread();
}

bool ProgressLoop::WaitFor(Completion& completion, std::chrono::milliseconds limit,
                           ReplyExpected* expected) {
  auto now = std::chrono::steady_clock::now();
  const auto deadline = now + limit;
  auto spin_until = now + kSpinWithoutProgress;
  const ucp_worker_h worker = worker_->handle();
  std::uint32_t polls = 0;
  if (expected != nullptr && expected->loop_ == this) {
    expected->loop_ = nullptr;  // its count is this wait's now
  } else {
    spinning_waiters_.fetch_add(1);
  }
  while (!completion.done.load(std::memory_order_acquire)) {
    if (ucp_worker_progress(worker) != 0) spin_until = now + kSpinWithoutProgress;
    if (++polls % kPollsPerClockRead != 0) continue;
    now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      spinning_waiters_.fetch_sub(1);
      UnparkProgressThread();
      return completion.done.load(std::memory_order_acquire);
    }
    if (now >= spin_until) break;
  }
  spinning_waiters_.fetch_sub(1);
  // Got its reply: no wake-up (a system call, and a thread competing for the
  // core, on every call); the napping progress thread resumes by itself.
  if (completion.done.load(std::memory_order_acquire)) return true;
  UnparkProgressThread();  // this thread sleeps now: the progress thread drives
  std::unique_lock lock(completion.mutex);
  return completion.changed.wait_until(lock, deadline, [&] { return completion.done.load(); });
}

bool ProgressLoop::ProgressHere(const std::function<bool()>& done, std::chrono::microseconds spin) {
  if (tls_in_ucx_callback || tls_on_progress_thread) return done();
  const ucp_worker_h worker = worker_->handle();
  driving_threads_.fetch_add(1);
  spinning_waiters_.fetch_add(1);
  tls_driving_progress = true;
  const auto started = std::chrono::steady_clock::now();
  auto spin_until = started + spin;
  // One per thread: a worker drives in windows of 100 us between tasks, and
  // a pacer made per window would start again at the shortest interval.
  thread_local YieldPacer yield_pacer(started);
  yield_pacer.Restart(started);
  bool finished = done();
  while (!finished) {
    bool progressed = client_.SendPosted();
    while (ucp_worker_progress(worker) != 0) progressed = true;
    finished = done();
    if (finished) break;
    const auto now = std::chrono::steady_clock::now();
    if (progressed) {
      spin_until = now + spin;
    } else if (now >= spin_until) {
      break;
    } else {
      yield_pacer.MaybeYield(now);
    }
  }
  // What handlers posted on this thread goes out before it leaves.
  client_.SendPosted();
  tls_driving_progress = false;
  spinning_waiters_.fetch_sub(1);
  driving_threads_.fetch_sub(1);
  // Found work: the progress thread stays parked, as this thread will
  // probably be back soon (it looks again within kParkedRecheck if not).
  // Gave up: it drives from now on.
  if (!finished) UnparkProgressThread();
  return finished;
}

void ProgressLoop::ProgressUntil(const std::function<bool()>& finished) {
  const auto deadline = std::chrono::steady_clock::now() + kCancelledRequestWait;
  while (!finished() && std::chrono::steady_clock::now() < deadline) {
    if (ucp_worker_progress(worker_->handle()) == 0) std::this_thread::yield();
  }
}

void ProgressLoop::Run() {
  tls_on_progress_thread = true;
  const ucp_worker_h worker = worker_->handle();
  auto last_activity = std::chrono::steady_clock::now();
  YieldPacer yield_pacer(last_activity);
  std::uint32_t empty_polls = 0;
  while (!stopping_.load()) {
    if (long_operations_ != nullptr && long_operations_->any()) {
      // The operation holds the worker's lock: progressing now would spin on
      // it. Not parked_: posters must leave their messages in the outbox, not
      // send them (and spin) themselves. Operations that keep coming get one
      // full pass per kParkedRecheck, as the client is promised.
      if (long_operations_->WaitUntilNone(kParkedRecheck)) {
        yield_pacer.Restart(std::chrono::steady_clock::now());
        continue;
      }
      client_.Housekeeping(std::chrono::steady_clock::now());
    }
    if (spinning_waiters_.load() > 0 && !client_.HasPosted()) {
      // Another thread drives the worker itself: stay off the CPU, off the
      // worker's lock and off the event fd (which would wake this thread
      // for every message).
      client_.Housekeeping(std::chrono::steady_clock::now());
      std::unique_lock lock(park_mutex_);
      parked_.store(true);
      park_changed_.wait_for(
          lock, driving_threads_.load() == 0 ? kNapWhileCallersWait : kParkedRecheck, [this] {
            return spinning_waiters_.load() == 0 || client_.HasPosted() || stopping_.load();
          });
      parked_.store(false);
      last_activity = std::chrono::steady_clock::now();
      yield_pacer.Restart(last_activity);
      continue;
    }
    bool progressed = client_.SendPosted();
    while (ucp_worker_progress(worker) != 0) progressed = true;
    // Empty polls read the clock (and do the housekeeping, which keeps its
    // own intervals) once in kPollsPerClockRead: read on every poll, the
    // clock was a quarter of this thread's samples serving small calls.
    if (!progressed && ++empty_polls % kPollsPerClockRead != 0) continue;
    const auto now = std::chrono::steady_clock::now();
    if (progressed) last_activity = now;
    client_.Housekeeping(now);
    if (now - last_activity < kBusyPollAfterActivity) {
      // Under steady traffic too: the core is shared with the node's other
      // processes, and the pacer backs off while nobody else wants it.
      yield_pacer.MaybeYield(now);
      continue;
    }
    sleeping_.store(true);
    if (client_.HasPosted()) {
      sleeping_.store(false);
      continue;
    }
    const ucs_status_t armed = ucp_worker_arm(worker);
    // Arming may swallow a signal a poster just sent: look once more.
    if (armed == UCS_ERR_BUSY || client_.HasPosted()) {
      sleeping_.store(false);
      continue;
    }
    pollfd descriptor{.fd = event_fd_, .events = POLLIN, .revents = 0};
    if (poll(&descriptor, 1, kPollTimeoutMilliseconds) > 0) {
      last_activity = std::chrono::steady_clock::now();
    }
    yield_pacer.Restart(std::chrono::steady_clock::now());
    sleeping_.store(false);
  }
}

}  // namespace sray::transport
