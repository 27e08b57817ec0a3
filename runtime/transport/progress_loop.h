#pragma once

// Who drives a transport's UCX worker, and when: the progress thread, a
// caller waiting for its reply, or a thread that waits for work by message
// (ProgressHere). All the rules about sleeping, parking and napping live
// here; the numbers behind them are in docs/ARCHITECTURE.md (Transport).
//
// The protocol, by its atomics:
// - spinning_waiters_: threads polling the worker themselves (WaitFor for up
//   to kSpinWithoutProgress without progress, ProgressHere for its `spin`),
//   and callers from before StartCall sends their request to their WaitFor
//   (ReplyExpected; their endpoint is made before).
//   While it is non-zero and nothing is posted, the progress thread stays
//   off the worker (progressing too would make the caller wait for the
//   worker's lock, most of a small call's time).
// - driving_threads_: threads in ProgressHere (counted in spinning_waiters_
//   too). While one drives, the progress thread parks on park_changed_ and
//   looks again every kParkedRecheck; with only reply-waiters it parks for
//   kNapWhileCallersWait at a time.
// - parked_: the progress thread waits on park_changed_. A waiter that gives
//   up, and a poster (outside a driving thread), unpark it. A waiter that got
//   its reply does not: a wake-up per call doubled to tripled small-message
//   latency (measured).
// - sleeping_: the progress thread is in (or about to enter) poll() on the
//   worker's event fd, after an idle kBusyPollAfterActivity. It sets the flag
//   before its last look at the outbox (Client::HasPosted), and posters set
//   the outbox's flag before they look at sleeping_ (both sequentially
//   consistent), so a post either is seen or signals the worker.
// - stopping_: Stop was called; the thread leaves within kPollTimeout.
// - long_operations_ (transport/long_operations): while another thread
//   creates an endpoint, the progress thread waits for it to end instead of
//   spinning on the worker's lock, for at most kParkedRecheck at a time, then
//   makes one full pass. It does not set parked_ meanwhile: posters queue
//   their messages instead of sending them on the locked worker.
//
// Thread-safety: every member may be called from any thread, except that
// Start and Stop are called once each by the owner.

#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "common/status.h"
#include "transport/completion.h"
#include "transport/long_operations.h"
#include "transport/ucx_handles.h"

namespace sray::transport {

// True while this thread runs inside a UCX callback, where UCX forbids
// progressing the worker: a blocking call there would deadlock.
bool InUcxCallback();
// True on a transport's progress thread, which may send without handing off.
bool OnProgressThread();
// True while this thread drives the worker in ProgressHere: it sends what it
// posts itself before it leaves.
bool DrivingProgress();

// Marks the current thread as inside a UCX callback for its lifetime.
class CallbackScope {
 public:
  CallbackScope();
  ~CallbackScope();
  CallbackScope(const CallbackScope&) = delete;
  CallbackScope& operator=(const CallbackScope&) = delete;

 private:
  bool previous_;
};

class ProgressLoop {
 public:
  // What the progress thread does besides progressing the worker.
  class Client {
   public:
    virtual ~Client() = default;
    // Hands posted messages to UCX; true if there were any.
    virtual bool SendPosted() = 0;
    [[nodiscard]] virtual bool HasPosted() const = 0;
    // Periodic work (closing endpoints, probing peers), at least every
    // kParkedRecheck while the loop runs.
    virtual void Housekeeping(std::chrono::steady_clock::time_point now) = 0;
  };

  // `client` and `long_operations` (may be null) must outlive the loop's
  // thread (Stop joins it).
  ProgressLoop(std::shared_ptr<UcxWorker> worker, Client& client,
               LongOperations* long_operations = nullptr);
  ~ProgressLoop();
  ProgressLoop(const ProgressLoop&) = delete;
  ProgressLoop& operator=(const ProgressLoop&) = delete;

  Status Start();
  // Stops and joins the progress thread. Idempotent.
  void Stop();
  [[nodiscard]] bool stopping() const { return stopping_.load(); }
  [[nodiscard]] bool progress_thread_sleeping() const { return sleeping_.load(); }
  [[nodiscard]] bool progress_thread_parked() const { return parked_.load(); }
  // Threads that poll the worker themselves, or are about to (tests).
  [[nodiscard]] int spinning_waiters() const { return spinning_waiters_.load(); }

  // Counts the calling thread among the reply-waiters (spinning_waiters_)
  // from before it sends its request, so that the progress thread does not
  // take the gap between the send and WaitFor to leave its park and spin on
  // the worker's lock behind the caller (most of the wait of a small call on
  // shared memory: docs/benchmarks.md, Transport). Hand it to WaitFor, which
  // takes the count over; dropped without that, it uncounts the thread.
  class ReplyExpected {
   public:
    explicit ReplyExpected(ProgressLoop& loop);
    ~ReplyExpected();
    ReplyExpected(const ReplyExpected&) = delete;
    ReplyExpected& operator=(const ReplyExpected&) = delete;

   private:
    friend class ProgressLoop;
    ProgressLoop* loop_;  // null once WaitFor took the count over
  };

  // Waits for `completion` until `limit`: polls the worker on this thread
  // while that makes progress, then sleeps and leaves the worker to the
  // progress thread. False on timeout. `expected`, if given, is this
  // thread's count from before its send.
  bool WaitFor(Completion& completion, std::chrono::milliseconds limit,
               ReplyExpected* expected = nullptr);
  // Transport::ProgressHere (transport.h).
  bool ProgressHere(const std::function<bool()>& done, std::chrono::microseconds spin);
  // Progresses the worker on this thread until `finished()`, for at most
  // five seconds: for waiting out a cancelled request.
  void ProgressUntil(const std::function<bool()>& finished);

  // A message was posted (the outbox's flag is set): a sleeping progress
  // thread is signalled, a parked one woken unless this thread drives.
  void NoticePosted();
  // Wakes a sleeping progress thread to drive sends started elsewhere.
  void Signal();
  void UnparkProgressThread();

 private:
  void Run();

  std::shared_ptr<UcxWorker> worker_;
  Client& client_;
  LongOperations* const long_operations_;
  int event_fd_ = -1;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> spinning_waiters_{0};
  std::atomic<int> driving_threads_{0};
  std::atomic<bool> sleeping_{false};
  std::atomic<bool> parked_{false};
  std::mutex park_mutex_;
  std::condition_variable park_changed_;
};

}  // namespace sray::transport
