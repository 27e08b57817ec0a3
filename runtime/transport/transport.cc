#include "transport/transport.h"

#include <poll.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <unordered_map>

#include "transport/message_batch.h"
#include "transport/ucx_status.h"

namespace sray::transport {
namespace {

// The one UCX active-message id sray uses; FrameHeader::kind and ::method
// say what a message is.
constexpr unsigned kActiveMessageId = 7;
// A waiting caller polls the worker itself for this long without progress
// before it sleeps and leaves the work to the progress thread.
constexpr std::chrono::microseconds kSpinWithoutProgress{50};
// The progress thread wakes at least this often to notice shutdown.
constexpr int kPollTimeoutMilliseconds = 200;
// After activity the progress thread keeps polling this long before it
// sleeps, so a request that follows a reply closely is served without a
// wake-up (several microseconds each way). It does not poll while a caller
// thread is already polling the worker itself.
constexpr std::chrono::microseconds kBusyPollAfterActivity{100};
// While polling after activity, the progress thread yields its core once in
// this many empty polls.
constexpr std::uint32_t kEmptyPollsPerYield = 16;
// How long the progress thread naps while a caller polls for its reply.
constexpr std::chrono::microseconds kYieldToSpinningCaller{20};
// While another thread drives the worker, the progress thread sleeps; it
// looks again this often, so a driver that went off to run long work (a
// worker's task) does not leave messages unread for longer.
constexpr std::chrono::microseconds kParkedRecheck{500};
// Rendezvous receive buffers are recycled: a fresh large allocation costs
// page faults on every byte, which would halve large-message bandwidth.
constexpr std::size_t kPooledBufferMinimum = std::size_t{64} * 1024;
// Enough for a window of large messages in flight; older buffers go first.
constexpr std::size_t kPooledBytesKept = std::size_t{256} << 20;
// How often ranks with calls in flight are probed for liveness.
constexpr std::chrono::milliseconds kLivenessInterval{250};

// True while this thread runs inside a UCX callback, where UCX forbids
// progressing the worker: a blocking call there would deadlock.
thread_local bool tls_in_ucx_callback = false;
// True on a transport's progress thread, which may send without handing off.
thread_local bool tls_on_progress_thread = false;
// Set while a thread drives the worker in ProgressHere: it sends what it
// posts itself before it leaves.
thread_local bool tls_driving_progress = false;

class CallbackScope {
 public:
  CallbackScope() : previous_(tls_in_ucx_callback) { tls_in_ucx_callback = true; }
  ~CallbackScope() { tls_in_ucx_callback = previous_; }
  CallbackScope(const CallbackScope&) = delete;
  CallbackScope& operator=(const CallbackScope&) = delete;

 private:
  bool previous_;
};

std::span<const std::byte> AsBytes(const void* data, std::size_t length) {
  return {static_cast<const std::byte*>(data), length};
}

Bytes EncodeError(const Status& status) {
  Bytes bytes(1 + status.message().size());
  bytes[0] = static_cast<std::byte>(status.code());
  std::memcpy(bytes.data() + 1, status.message().data(), status.message().size());
  return bytes;
}

Status DecodeError(std::span<const std::byte> bytes) {
  if (bytes.empty()) return Status::Internal("the peer sent an empty error response");
  return Status::FromCode(static_cast<StatusCode>(bytes[0]), std::string(TextOf(bytes.subspan(1))));
}

// Completion of one operation that a thread may wait for. Shared between the
// waiting thread and the UCX callbacks that finish it.
struct Completion {
  std::atomic<bool> done{false};
  std::mutex mutex;
  std::condition_variable changed;
  Status status;
  Bytes data;

  void Finish(Status final_status, Bytes final_data = {}) {
    {
      std::lock_guard lock(mutex);
      if (done.load(std::memory_order_relaxed)) return;
      status = std::move(final_status);
      data = std::move(final_data);
      done.store(true, std::memory_order_release);
    }
    changed.notify_all();
  }
};

}  // namespace

struct Responder::State {
  Transport::Impl* impl = nullptr;
  ucp_ep_h reply_endpoint = nullptr;
  FrameHeader header{};
  std::atomic<bool> answered{false};
  ~State();
};

class Transport::Impl {
  struct PendingCall;
  struct PostedMessage;

 public:
  Impl(TransportOptions options, std::shared_ptr<UcxWorker> worker)
      : options_(std::move(options)), worker_(std::move(worker)) {}

  ~Impl() { Shutdown(); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  Status Start() {
    ucp_am_handler_param_t handler{};
    handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                         UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
    handler.id = kActiveMessageId;
    handler.cb = &Impl::OnActiveMessage;
    handler.arg = this;
    handler.flags = UCP_AM_FLAG_WHOLE_MSG;
    SRAY_RETURN_IF_ERROR(FromUcs(ucp_worker_set_am_recv_handler(worker_->handle(), &handler),
                                 "cannot register the active-message handler"));
    SRAY_RETURN_IF_ERROR(FromUcs(ucp_worker_get_efd(worker_->handle(), &event_fd_),
                                 "cannot get the UCX worker's event file descriptor"));
    progress_thread_ = std::thread([this] { ProgressLoop(); });
    return Status::Ok();
  }

  void Shutdown() {
    if (!progress_thread_.joinable()) return;
    stopping_.store(true);
    ucp_worker_signal(worker_->handle());
    progress_thread_.join();

    std::vector<std::shared_ptr<PendingCall>> abandoned;
    {
      std::lock_guard lock(calls_mutex_);
      for (auto& [id, call] : pending_calls_) abandoned.push_back(call);
      pending_calls_.clear();
    }
    for (auto& call : abandoned) {
      call->Complete(Status::Unavailable("the transport of " + Describe(options_.rank) +
                                         " shut down before the reply came"));
    }
    CloseEndpoints();
  }

  [[nodiscard]] std::uint32_t rank() const { return options_.rank; }

  Result<Bytes> LocalAddress(bool network_only) const { return worker_->Address(network_only); }

  void RegisterRequestHandler(std::uint32_t method, RequestHandler handler) {
    std::unique_lock lock(handlers_mutex_);
    request_handlers_[method] = std::move(handler);
  }

  void RegisterDeferredRequestHandler(std::uint32_t method, DeferredRequestHandler handler) {
    std::unique_lock lock(handlers_mutex_);
    deferred_handlers_[method] = std::move(handler);
  }

  void RegisterOneWayHandler(std::uint32_t method, OneWayHandler handler) {
    std::unique_lock lock(handlers_mutex_);
    one_way_handlers_[method] = std::move(handler);
  }

  void CallAsync(std::uint32_t rank, std::uint32_t method, std::span<const std::byte> payload,
                 std::function<void(Result<Bytes>)> done) {
    StartCall(rank, method, payload, std::move(done));
  }

  // Registers the call and sends it from this thread.
  std::shared_ptr<PendingCall> StartCall(std::uint32_t rank, std::uint32_t method,
                                         std::span<const std::byte> payload,
                                         std::function<void(Result<Bytes>)> done) {
    auto call = std::make_shared<PendingCall>();
    call->rank = rank;
    call->on_done = std::move(done);
    call->id = next_request_id_.fetch_add(1);
    call->header = EncodeFrameHeader({.kind = FrameKind::kRequest,
                                      .source_rank = options_.rank,
                                      .method = method,
                                      .request_id = call->id,
                                      .token = options_.token});
    {
      std::lock_guard lock(calls_mutex_);
      pending_calls_[call->id] = call;
    }
    Transmit(call, payload);
    return call;
  }

  [[nodiscard]] bool ShouldHandOff() const {
    return !tls_on_progress_thread && !tls_in_ucx_callback && !progress_thread_sleeping_.load() &&
           !stopping_.load();
  }

  void Transmit(const std::shared_ptr<PendingCall>& call, std::span<const std::byte> payload) {
    auto endpoint = EndpointFor(call->rank);
    if (!endpoint.ok()) {
      call->MarkSent(Status::Ok());  // nothing was sent
      FailCall(call->id, endpoint.status());
      return;
    }
    // The peer may have failed between EndpointFor and the registration
    // above; FailCallsTo may then have missed this call.
    if (Status failure = FailureOf(call->rank); !failure.ok()) {
      call->MarkSent(Status::Ok());  // nothing was sent
      FailCall(call->id, failure);
      return;
    }
    auto* send_context = new SendContext{this, call, nullptr};
    ucp_request_param_t param{};
    param.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    param.cb.send = &Impl::OnSendComplete;
    param.user_data = send_context;
    param.flags = UCP_AM_SEND_FLAG_REPLY;
    const ucs_status_ptr_t request =
        ucp_am_send_nbx(*endpoint, kActiveMessageId, call->header.data(), call->header.size(),
                        payload.data(), payload.size(), &param);
    if (request == nullptr) {
      delete send_context;
      call->MarkSent(Status::Ok());
    } else if (UCS_PTR_IS_ERR(request)) {
      delete send_context;
      call->MarkSent(Status::Ok());  // nothing is in flight
      FailCall(call->id,
               FromUcs(UCS_PTR_STATUS(request), "cannot send to " + Describe(call->rank)));
    } else {
      std::lock_guard lock(call->mutex);
      if (!call->sent) call->send_request = request;
    }
  }

  Result<Bytes> Call(std::uint32_t rank, std::uint32_t method, std::span<const std::byte> payload,
                     std::optional<std::chrono::milliseconds> timeout) {
    if (tls_in_ucx_callback) return BlockingInCallbackError("Call");
    auto completion = std::make_shared<Completion>();
    auto call = StartCall(rank, method, payload, [completion](Result<Bytes> result) {
      if (result.ok()) {
        completion->Finish(Status::Ok(), std::move(result).value());
      } else {
        completion->Finish(result.status());
      }
    });
    const auto limit = timeout.value_or(options_.default_timeout);
    if (!WaitFor(*completion, limit)) {
      // The caller may free `payload` once we return, so a send still in
      // flight is cancelled and waited for first.
      FailCall(call->id, Status::Unavailable("timed out"));
      CancelAndAwait(*call);
      return Status::Unavailable("no reply from " + Describe(rank) + " within " +
                                 std::to_string(limit.count()) +
                                 " ms: the peer is overloaded or hung");
    }
    if (!completion->status.ok()) return completion->status;
    return std::move(completion->data);
  }

  Status Send(std::uint32_t rank, std::uint32_t method, std::span<const std::byte> payload) {
    if (tls_in_ucx_callback) return BlockingInCallbackError("Send");
    auto endpoint = EndpointFor(rank);
    if (!endpoint.ok()) return endpoint.status();
    const auto header = EncodeFrameHeader({.kind = FrameKind::kOneWay,
                                           .source_rank = options_.rank,
                                           .method = method,
                                           .request_id = 0,
                                           .token = options_.token});
    return RunOperation(
        rank, "send to", options_.default_timeout, [&](const ucp_request_param_t& param) {
          return ucp_am_send_nbx(*endpoint, kActiveMessageId, header.data(), header.size(),
                                 payload.data(), payload.size(), &param);
        });
  }

  void Post(std::uint32_t rank, std::uint32_t method, Bytes payload, bool send_here) {
    if (stopping_.load()) return;
    if (send_here && !tls_on_progress_thread && !tls_in_ucx_callback) {
      const bool sleeping = progress_thread_sleeping_.load();
      if (sleeping || progress_thread_parked_.load()) {
        {
          // Messages this thread posted before go first.
          std::lock_guard lock(send_mutex_);
          SendPostedLocked();
          TransmitOneWay(rank, method, std::move(payload));
        }
        // A sleeping progress thread drives what did not complete inline; a
        // parked one leaves that to the thread driving the worker.
        if (sleeping) ucp_worker_signal(worker_->handle());
        return;
      }
    }
    PostedMessage message;
    message.rank = rank;
    message.method = method;
    message.payload = std::move(payload);
    Enqueue(std::move(message));
  }

  void Enqueue(PostedMessage message) {
    {
      std::lock_guard lock(outbox_mutex_);
      outbox_.push_back(std::move(message));
      outbox_filled_.store(true);  // seq_cst: pairs with the sleeping flag
    }
    // Wake the progress thread only when it sleeps (or is about to): it
    // checks the outbox after announcing that, so no message is missed.
    if (progress_thread_sleeping_.load()) {
      ucp_worker_signal(worker_->handle());
    } else if (!tls_driving_progress) {
      UnparkProgressThread();
    }
  }

  Result<std::unique_ptr<RegisteredMemory>> Register(void* address, std::size_t length) {
    return RegisteredMemory::Map(worker_, address, length);
  }

  Status Pull(std::uint32_t rank, std::uint64_t remote_address,
              std::span<const std::byte> packed_key, void* local, std::size_t length,
              std::optional<std::chrono::milliseconds> timeout) {
    if (tls_in_ucx_callback) return BlockingInCallbackError("Pull");
    auto endpoint = EndpointFor(rank);
    if (!endpoint.ok()) return endpoint.status();
    auto key = RemoteKey::Unpack(*endpoint, packed_key);
    if (!key.ok()) return key.status();
    return RunOperation(rank, "pull from", timeout.value_or(options_.default_timeout),
                        [&](const ucp_request_param_t& param) {
                          return ucp_get_nbx(*endpoint, local, length, remote_address,
                                             (*key)->handle(), &param);
                        });
  }

  [[nodiscard]] TransportStatistics statistics() const {
    return {.requests_served = requests_served_.load(),
            .rejected_frames = rejected_frames_.load(),
            .malformed_frames = malformed_frames_.load(),
            .batches_received = batches_received_.load()};
  }

 private:
  struct PendingCall {
    std::uint64_t id = 0;
    std::uint32_t rank = 0;
    std::array<std::byte, kFrameHeaderSize> header{};
    std::function<void(Result<Bytes>)> on_done;
    // A call completes when both the send has finished (its payload is no
    // longer needed) and the response or an error has arrived. Recursive:
    // cancelling a send under the lock may run its callback on this thread.
    std::recursive_mutex mutex;
    bool sent = false;
    void* send_request = nullptr;  // valid while !sent; freed by the send callback
    bool finished = false;
    std::optional<Result<Bytes>> outcome;

    void MarkSent(const Status& status) {
      std::unique_lock lock(mutex);
      sent = true;
      send_request = nullptr;
      if (!status.ok() && !outcome) outcome = status;
      MaybeFinish(lock);
    }
    void Complete(Result<Bytes> result) {
      std::unique_lock lock(mutex);
      if (!outcome) outcome = std::move(result);
      MaybeFinish(lock);
    }

   private:
    void MaybeFinish(std::unique_lock<std::recursive_mutex>& lock) {
      if (finished || !sent || !outcome) return;
      finished = true;
      auto done = std::move(on_done);
      auto result = std::move(*outcome);
      lock.unlock();
      if (done) done(std::move(result));
    }
  };

  struct SendContext {
    Impl* impl;
    std::shared_ptr<PendingCall> call;  // set for requests
    // Owned copies of what a response sends: header and payload must live
    // until UCX reports the send complete.
    std::unique_ptr<std::pair<std::array<std::byte, kFrameHeaderSize>, Bytes>> reply;
  };

  struct OperationContext {
    std::shared_ptr<Completion> completion;
  };

  // A receive buffer that is not zero-filled on allocation.
  struct Buffer {
    std::unique_ptr<std::byte[]> data;
    std::size_t capacity = 0;
  };

  struct IncomingRendezvous {
    Impl* impl;
    FrameHeader header;
    ucp_ep_h reply_endpoint;
    Buffer buffer;
    std::size_t length;
  };

  Buffer AcquireBuffer(std::size_t length) {
    if (length >= kPooledBufferMinimum) {
      std::lock_guard lock(pool_mutex_);
      for (auto it = buffer_pool_.begin(); it != buffer_pool_.end(); ++it) {
        if (it->capacity >= length) {
          Buffer reused = std::move(*it);
          buffer_pool_.erase(it);
          pooled_bytes_ -= reused.capacity;
          return reused;
        }
      }
    }
    return {std::make_unique_for_overwrite<std::byte[]>(std::max<std::size_t>(length, 1)), length};
  }

  void ReleaseBuffer(Buffer buffer) {
    if (buffer.capacity < kPooledBufferMinimum) return;
    std::lock_guard lock(pool_mutex_);
    pooled_bytes_ += buffer.capacity;
    buffer_pool_.push_back(std::move(buffer));
    while (pooled_bytes_ > kPooledBytesKept && !buffer_pool_.empty()) {
      pooled_bytes_ -= buffer_pool_.front().capacity;
      buffer_pool_.erase(buffer_pool_.begin());
    }
  }

  struct EndpointState {
    ucp_ep_h handle = nullptr;
    Status failure;
  };

  struct ErrorHandlerContext {
    Impl* impl;
    std::uint32_t rank;
  };

  std::string Describe(std::uint32_t rank) const {
    return options_.describe_rank ? options_.describe_rank(rank) : "rank " + std::to_string(rank);
  }

  static Status BlockingInCallbackError(std::string_view operation) {
    return Status::Internal(std::string(operation) +
                            " was called from inside a message handler, where it would "
                            "deadlock: reply from the handler or hand the work to another thread");
  }

  // ---- waiting -------------------------------------------------------------

  bool WaitFor(Completion& completion, std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    auto spin_until = std::chrono::steady_clock::now() + kSpinWithoutProgress;
    spinning_waiters_.fetch_add(1);
    while (!completion.done.load(std::memory_order_acquire)) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) {
        spinning_waiters_.fetch_sub(1);
        return false;
      }
      if (now >= spin_until) break;
      if (ucp_worker_progress(worker_->handle()) != 0) spin_until = now + kSpinWithoutProgress;
    }
    spinning_waiters_.fetch_sub(1);
    UnparkProgressThread();  // this thread sleeps now: the progress thread drives
    std::unique_lock lock(completion.mutex);
    return completion.changed.wait_until(lock, deadline, [&] { return completion.done.load(); });
  }

 public:
  bool ProgressHere(const std::function<bool()>& done, std::chrono::microseconds spin) {
    if (tls_in_ucx_callback || tls_on_progress_thread) return done();
    const ucp_worker_h worker = worker_->handle();
    driving_threads_.fetch_add(1);
    spinning_waiters_.fetch_add(1);
    tls_driving_progress = true;
    auto spin_until = std::chrono::steady_clock::now() + spin;
    std::uint32_t empty_polls = 0;
    bool finished = done();
    while (!finished) {
      bool progressed = SendPosted();
      while (ucp_worker_progress(worker) != 0) progressed = true;
      finished = done();
      if (finished) break;
      const auto now = std::chrono::steady_clock::now();
      if (progressed) {
        spin_until = now + spin;
      } else if (now >= spin_until) {
        break;
      } else if (++empty_polls % kEmptyPollsPerYield == 0) {
        std::this_thread::yield();
      }
    }
    // What handlers posted on this thread goes out before it leaves.
    SendPosted();
    tls_driving_progress = false;
    spinning_waiters_.fetch_sub(1);
    driving_threads_.fetch_sub(1);
    // Found work: the progress thread stays asleep, as this thread will
    // probably be back soon (it looks again within kParkedRecheck if not).
    // Gave up: it drives from now on.
    if (!finished) UnparkProgressThread();
    return finished;
  }

  void UnparkProgressThread() {
    if (!progress_thread_parked_.load()) return;
    std::lock_guard lock(park_mutex_);
    park_changed_.notify_one();
  }

 private:
  // Starts one UCX operation through `start` (given the request parameters)
  // and waits for it, within `limit`.
  template <typename Start>
  Status RunOperation(std::uint32_t rank, std::string_view verb, std::chrono::milliseconds limit,
                      Start&& start) {
    auto completion = std::make_shared<Completion>();
    auto* context = new OperationContext{completion};
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = &Impl::OnOperationComplete;
    param.user_data = context;
    const ucs_status_ptr_t request = start(param);
    return FinishOperation(request, context, completion, rank, verb, limit);
  }

  Status FinishOperation(ucs_status_ptr_t request, OperationContext* context,
                         const std::shared_ptr<Completion>& completion, std::uint32_t rank,
                         std::string_view verb, std::chrono::milliseconds limit) {
    if (request == nullptr) {
      delete context;
      return Status::Ok();
    }
    if (UCS_PTR_IS_ERR(request)) {
      delete context;
      return FromUcs(UCS_PTR_STATUS(request), "cannot " + std::string(verb) + " " + Describe(rank));
    }
    if (!WaitFor(*completion, limit)) {
      // Cancelling makes UCX call the callback, which frees the request and
      // the context; until then UCX may still touch the caller's buffer.
      ucp_request_cancel(worker_->handle(), request);
      ProgressUntil([&] { return completion->done.load(); });
      return Status::Unavailable("cannot " + std::string(verb) + " " + Describe(rank) +
                                 ": no completion within " + std::to_string(limit.count()) + " ms");
    }
    if (!completion->status.ok()) {
      return completion->status.WithContext("cannot " + std::string(verb) + " " + Describe(rank));
    }
    return Status::Ok();
  }

  // Progresses the worker from this thread until `finished` or a bound.
  template <typename Predicate>
  void ProgressUntil(Predicate finished) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!finished() && std::chrono::steady_clock::now() < deadline) {
      if (ucp_worker_progress(worker_->handle()) == 0) std::this_thread::yield();
    }
  }

  void CancelAndAwait(PendingCall& call) {
    {
      std::lock_guard lock(call.mutex);
      if (!call.sent && call.send_request != nullptr) {
        ucp_request_cancel(worker_->handle(), call.send_request);
      }
    }
    ProgressUntil([&] {
      std::lock_guard lock(call.mutex);
      return call.sent;
    });
  }

  // ---- endpoints -----------------------------------------------------------

  Result<ucp_ep_h> EndpointFor(std::uint32_t rank) {
    {
      std::lock_guard lock(endpoints_mutex_);
      auto found = endpoints_.find(rank);
      if (found != endpoints_.end()) {
        if (!found->second.failure.ok()) return found->second.failure;
        return found->second.handle;
      }
    }
    if (!options_.resolve_address) {
      return Status::NotFound("no address resolver: cannot reach " + Describe(rank));
    }
    // Resolution may block (a PMIx lookup), so it runs without the lock; a
    // racing thread's endpoint wins and ours is closed.
    auto address = options_.resolve_address(rank);
    if (!address.ok()) return address.status().WithContext("cannot reach " + Describe(rank));
    auto* error_context = new ErrorHandlerContext{this, rank};
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(address->data());
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = &Impl::OnEndpointError;
    params.err_handler.arg = error_context;
    ucp_ep_h handle = nullptr;
    const ucs_status_t status = ucp_ep_create(worker_->handle(), &params, &handle);
    if (status != UCS_OK) {
      delete error_context;
      // Connecting to a process that already died fails here (on shared
      // memory: "Shared memory error"); say so the way every peer death is said.
      if (options_.peer_alive && !options_.peer_alive(rank)) {
        return PeerFailure(rank, std::string("its process is gone: ") + ucs_status_string(status));
      }
      return FromUcs(status, "cannot connect to " + Describe(rank));
    }
    std::lock_guard lock(endpoints_mutex_);
    auto [entry, inserted] = endpoints_.try_emplace(rank);
    if (!inserted) {
      closing_.push_back(handle);
      endpoints_to_close_.store(true);
      error_contexts_.emplace_back(error_context);
      if (!entry->second.failure.ok()) return entry->second.failure;
      return entry->second.handle;
    }
    entry->second.handle = handle;
    error_contexts_.emplace_back(error_context);
    return handle;
  }

  Status FailureOf(std::uint32_t rank) {
    std::lock_guard lock(endpoints_mutex_);
    auto found = endpoints_.find(rank);
    return found == endpoints_.end() ? Status::Ok() : found->second.failure;
  }

  void FailCall(std::uint64_t id, const Status& status) {
    std::shared_ptr<PendingCall> call;
    {
      std::lock_guard lock(calls_mutex_);
      auto found = pending_calls_.find(id);
      if (found == pending_calls_.end()) return;
      call = found->second;
      pending_calls_.erase(found);
    }
    call->Complete(status);
  }

  void FailCallsTo(std::uint32_t rank, const Status& status) {
    std::vector<std::shared_ptr<PendingCall>> failed;
    {
      std::lock_guard lock(calls_mutex_);
      for (auto it = pending_calls_.begin(); it != pending_calls_.end();) {
        if (it->second->rank == rank) {
          failed.push_back(it->second);
          it = pending_calls_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto& call : failed) call->Complete(status);
  }

  void CloseEndpoints() {
    std::vector<ucp_ep_h> handles;
    {
      std::lock_guard lock(endpoints_mutex_);
      for (auto& [rank, state] : endpoints_) {
        if (state.handle != nullptr) handles.push_back(state.handle);
      }
      endpoints_.clear();
      handles.insert(handles.end(), closing_.begin(), closing_.end());
      closing_.clear();
    }
    // Flush politely for a moment so peers see an orderly disconnect, then
    // force whatever is still open.
    std::vector<ucs_status_ptr_t> requests;
    for (ucp_ep_h handle : handles) {
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = 0;
      const ucs_status_ptr_t request = ucp_ep_close_nbx(handle, &param);
      if (request != nullptr && !UCS_PTR_IS_ERR(request)) requests.push_back(request);
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    for (ucs_status_ptr_t request : requests) {
      while (ucp_request_check_status(request) == UCS_INPROGRESS &&
             std::chrono::steady_clock::now() < deadline) {
        ucp_worker_progress(worker_->handle());
      }
      if (ucp_request_check_status(request) == UCS_INPROGRESS) {
        ucp_request_cancel(worker_->handle(), request);
        while (ucp_request_check_status(request) == UCS_INPROGRESS) {
          ucp_worker_progress(worker_->handle());
        }
      }
      ucp_request_free(request);
    }
  }

  // Force-closes endpoints queued by callbacks, which may not close them.
  void CloseQueuedEndpoints() {
    if (!endpoints_to_close_.exchange(false)) return;
    std::vector<ucp_ep_h> handles;
    {
      std::lock_guard lock(endpoints_mutex_);
      handles.swap(closing_);
    }
    for (ucp_ep_h handle : handles) {
      ucp_request_param_t param{};
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = UCP_EP_CLOSE_FLAG_FORCE;
      const ucs_status_ptr_t request = ucp_ep_close_nbx(handle, &param);
      if (request != nullptr && !UCS_PTR_IS_ERR(request)) {
        while (ucp_request_check_status(request) == UCS_INPROGRESS) {
          ucp_worker_progress(worker_->handle());
        }
        ucp_request_free(request);
      }
    }
  }

  // ---- progress ------------------------------------------------------------

  void ProgressLoop() {
    tls_on_progress_thread = true;
    const ucp_worker_h worker = worker_->handle();
    auto last_activity = std::chrono::steady_clock::now();
    std::uint32_t empty_polls = 0;
    while (!stopping_.load()) {
      if (spinning_waiters_.load() > 0 && !OutboxHasMessages()) {
        // Another thread drives the worker itself. Stay off the CPU, off the
        // worker's lock (progressing here would make the caller wait for it:
        // most of a small call's time, measured) and off the event fd (which
        // would wake this thread for every message). The driver wakes this
        // thread when it gives up, a post does, and it looks by itself now
        // and then.
        CloseQueuedEndpoints();
        ProbeAwaitedPeers(std::chrono::steady_clock::now());
        if (driving_threads_.load() == 0) {
          // Only callers waiting for a reply, for at most kSpinWithoutProgress
          // without progress: a short nap. (Parking on the condition variable
          // here doubled to tripled shared-memory latency from 512 B up,
          // measured with transport_bench latency.)
          std::this_thread::sleep_for(kYieldToSpinningCaller);
        } else {
          std::unique_lock lock(park_mutex_);
          progress_thread_parked_.store(true);
          park_changed_.wait_for(lock, kParkedRecheck, [this] {
            return spinning_waiters_.load() == 0 || OutboxHasMessages() || stopping_.load();
          });
          progress_thread_parked_.store(false);
        }
        last_activity = std::chrono::steady_clock::now();
        continue;
      }
      bool progressed = SendPosted();
      while (ucp_worker_progress(worker) != 0) progressed = true;
      const auto now = std::chrono::steady_clock::now();
      if (progressed) last_activity = now;
      CloseQueuedEndpoints();
      ProbeAwaitedPeers(now);
      if (now - last_activity < kBusyPollAfterActivity) {
        // Polling for more. Now and then let a thread that has work (this
        // process's or another's) have the core; yielding on every empty
        // poll costs a system call each time, and a message that arrives
        // meanwhile waits for it (a third of a small round trip, measured).
        if (++empty_polls % kEmptyPollsPerYield == 0) std::this_thread::yield();
        continue;
      }
      progress_thread_sleeping_.store(true);
      if (OutboxHasMessages()) {
        progress_thread_sleeping_.store(false);
        continue;
      }
      const ucs_status_t armed = ucp_worker_arm(worker);
      // Arming may swallow a signal a poster just sent: look once more.
      if (armed == UCS_ERR_BUSY || OutboxHasMessages()) {
        progress_thread_sleeping_.store(false);
        continue;
      }
      pollfd descriptor{.fd = event_fd_, .events = POLLIN, .revents = 0};
      if (poll(&descriptor, 1, kPollTimeoutMilliseconds) > 0) {
        last_activity = std::chrono::steady_clock::now();
      }
      progress_thread_sleeping_.store(false);
    }
  }

  enum class PostedKind : std::uint8_t { kOneWay, kReply };
  struct PostedMessage {
    PostedKind kind = PostedKind::kOneWay;
    std::uint32_t rank = 0;
    std::uint32_t method = 0;
    Bytes payload;                      // one-way messages
    ucp_ep_h reply_endpoint = nullptr;  // replies
    std::unique_ptr<std::pair<std::array<std::byte, kFrameHeaderSize>, Bytes>> reply;
  };

  bool OutboxHasMessages() { return outbox_filled_.load(); }

  // Progress thread: hands posted messages to UCX. True if there were any.
  bool SendPosted() {
    if (!outbox_filled_.load(std::memory_order_acquire)) return false;
    // One sender at a time keeps each peer's messages in posting order.
    std::lock_guard lock(send_mutex_);
    return SendPostedLocked();
  }

  bool SendPostedLocked() {
    if (!outbox_filled_.load(std::memory_order_acquire)) return false;
    std::vector<PostedMessage> batch;
    {
      std::lock_guard lock(outbox_mutex_);
      outbox_filled_.store(false, std::memory_order_relaxed);
      if (outbox_.empty()) return false;
      batch.swap(outbox_);
    }
    // Small messages to one peer share a frame (transport/message_batch.h);
    // each peer's messages keep their order. Few peers per turn: a vector.
    std::vector<OutgoingBatch> open;
    auto open_for = [&](std::uint32_t rank) -> OutgoingBatch* {
      for (auto& outgoing : open) {
        if (outgoing.rank == rank) return &outgoing;
      }
      return nullptr;
    };
    for (auto& message : batch) {
      if (message.kind == PostedKind::kReply) {
        TransmitReply(message.reply_endpoint, std::move(message.reply));
        continue;
      }
      OutgoingBatch* outgoing = open_for(message.rank);
      if (message.payload.size() > kBatchableMessageLimit) {
        if (outgoing != nullptr) Flush(*outgoing);
        TransmitOneWay(message.rank, message.method, std::move(message.payload));
        continue;
      }
      if (outgoing == nullptr) {
        outgoing = &open.emplace_back();
        outgoing->rank = message.rank;
      }
      outgoing->Add(message.method, std::move(message.payload));
      if (outgoing->batch.size_bytes() >= kBatchBytesLimit) Flush(*outgoing);
    }
    for (auto& outgoing : open) Flush(outgoing);
    return true;
  }

  // Messages for one peer gathered in one turn of the progress thread. The
  // first is held as it is, so a lone message is sent without a copy.
  struct OutgoingBatch {
    std::uint32_t rank = 0;
    bool holds_first = false;
    std::uint32_t first_method = 0;
    Bytes first_payload;
    MessageBatch batch;

    void Add(std::uint32_t method, Bytes payload) {
      if (!holds_first && batch.count() == 0) {
        holds_first = true;
        first_method = method;
        first_payload = std::move(payload);
        return;
      }
      if (holds_first) {
        batch.Append(first_method, first_payload);
        holds_first = false;
        first_payload.clear();
      }
      batch.Append(method, payload);
    }
  };

  void Flush(OutgoingBatch& outgoing) {
    if (outgoing.holds_first) {
      outgoing.holds_first = false;
      TransmitOneWay(outgoing.rank, outgoing.first_method, std::move(outgoing.first_payload));
      outgoing.first_payload = Bytes();
    } else if (outgoing.batch.count() > 0) {
      TransmitFrame(outgoing.rank, FrameKind::kBatch, 0, outgoing.batch.Take());
    }
  }

  // Sends on an endpoint this transport made itself (never a peer's reply
  // endpoint, which UCX frees when the peer dies): a dead or unknown peer's
  // message is dropped, never a crash.
  void TransmitOneWay(std::uint32_t rank, std::uint32_t method, Bytes payload) {
    TransmitFrame(rank, FrameKind::kOneWay, method, std::move(payload));
  }

  void TransmitFrame(std::uint32_t rank, FrameKind kind, std::uint32_t method, Bytes payload) {
    auto endpoint = EndpointFor(rank);
    if (!endpoint.ok()) return;  // the peer is gone or unknown: dropped
    auto frame = std::make_unique<std::pair<std::array<std::byte, kFrameHeaderSize>, Bytes>>();
    frame->first = EncodeFrameHeader({.kind = kind,
                                      .source_rank = options_.rank,
                                      .method = method,
                                      .request_id = 0,
                                      .token = options_.token});
    frame->second = std::move(payload);
    auto* context = new SendContext{this, nullptr, std::move(frame)};
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = &Impl::OnSendComplete;
    param.user_data = context;
    const ucs_status_ptr_t request = ucp_am_send_nbx(
        *endpoint, kActiveMessageId, context->reply->first.data(), context->reply->first.size(),
        context->reply->second.data(), context->reply->second.size(), &param);
    if (request == nullptr || UCS_PTR_IS_ERR(request)) delete context;
  }

  // Fails the calls to peers whose process is gone, when the liveness probe
  // can tell (same node) and UCX has not noticed yet.
  void ProbeAwaitedPeers(std::chrono::steady_clock::time_point now) {
    if (!options_.peer_alive) return;
    if (now - last_liveness_probe_ < kLivenessInterval) return;
    last_liveness_probe_ = now;
    std::vector<std::uint32_t> awaited;
    {
      std::lock_guard lock(calls_mutex_);
      for (const auto& [id, call] : pending_calls_) awaited.push_back(call->rank);
    }
    std::sort(awaited.begin(), awaited.end());
    awaited.erase(std::unique(awaited.begin(), awaited.end()), awaited.end());
    for (const std::uint32_t rank : awaited) {
      if (options_.peer_alive(rank)) continue;
      const Status failure = PeerFailure(rank, "its process is gone");
      {
        std::lock_guard lock(endpoints_mutex_);
        auto found = endpoints_.find(rank);
        if (found != endpoints_.end() && found->second.failure.ok())
          found->second.failure = failure;
      }
      FailCallsTo(rank, failure);
    }
  }

  // ---- callbacks (never throw) ---------------------------------------------

  // One wording for every way a peer is found dead, so callers and tests
  // can rely on it.
  Status PeerFailure(std::uint32_t rank, std::string_view cause) const {
    return Status::Unavailable(Describe(rank) + " is unreachable (" + std::string(cause) +
                               "): the process died or its node failed");
  }

  static void OnEndpointError(void* arg, ucp_ep_h endpoint, ucs_status_t status) noexcept {
    CallbackScope scope;
    auto* context = static_cast<ErrorHandlerContext*>(arg);
    Impl* impl = context->impl;
    const Status failure = impl->PeerFailure(context->rank, ucs_status_string(status));
    {
      std::lock_guard lock(impl->endpoints_mutex_);
      auto found = impl->endpoints_.find(context->rank);
      if (found != impl->endpoints_.end() && found->second.handle == endpoint) {
        // The handle stays open until shutdown: another thread may be about
        // to send on it (operations on a failed endpoint just fail), and
        // closing it now would free it under that thread's feet.
        found->second.failure = failure;
      }
    }
    impl->FailCallsTo(context->rank, failure);
  }

  static void OnSendComplete(void* request, ucs_status_t status, void* user_data) noexcept {
    CallbackScope scope;
    auto* context = static_cast<SendContext*>(user_data);
    if (context->call) {
      const Status sent = status == UCS_OK ? Status::Ok()
                                           : context->impl->PeerFailure(context->call->rank,
                                                                        ucs_status_string(status));
      context->call->MarkSent(sent);
      if (!sent.ok()) context->impl->FailCall(context->call->id, sent);
    }
    delete context;
    ucp_request_free(request);
  }

  static void OnOperationComplete(void* request, ucs_status_t status, void* user_data) noexcept {
    CallbackScope scope;
    auto* context = static_cast<OperationContext*>(user_data);
    context->completion->Finish(FromUcs(status, "operation failed"));
    delete context;
    ucp_request_free(request);
  }

  static void OnRendezvousData(void* request, ucs_status_t status, std::size_t /*length*/,
                               void* user_data) noexcept {
    CallbackScope scope;
    auto* incoming = static_cast<IncomingRendezvous*>(user_data);
    if (status == UCS_OK) {
      incoming->impl->Dispatch(incoming->header, incoming->reply_endpoint,
                               std::span(incoming->buffer.data.get(), incoming->length));
    }
    incoming->impl->ReleaseBuffer(std::move(incoming->buffer));
    delete incoming;
    ucp_request_free(request);
  }

  static ucs_status_t OnActiveMessage(void* arg, const void* header, std::size_t header_length,
                                      void* data, std::size_t length,
                                      const ucp_am_recv_param_t* param) noexcept {
    CallbackScope scope;
    auto* impl = static_cast<Impl*>(arg);
    const ucp_ep_h reply_endpoint =
        (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) != 0 ? param->reply_ep : nullptr;
    auto decoded = DecodeFrameHeader(AsBytes(header, header_length));
    if (!decoded.ok()) {
      // Dropped unread, and never answered: a peer that cannot prove it
      // belongs to the job learns nothing, not even an error text.
      impl->malformed_frames_.fetch_add(1);
      return UCS_OK;
    }
    if (!TokensMatch(impl->options_.token, decoded->token)) {
      impl->rejected_frames_.fetch_add(1);
      return UCS_OK;
    }
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) {
      try {
        auto* incoming = new IncomingRendezvous{impl, *decoded, reply_endpoint,
                                                impl->AcquireBuffer(length), length};
        ucp_request_param_t receive{};
        receive.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
        receive.cb.recv_am = &Impl::OnRendezvousData;
        receive.user_data = incoming;
        const ucs_status_ptr_t request = ucp_am_recv_data_nbx(
            impl->worker_->handle(), data, incoming->buffer.data.get(), length, &receive);
        if (request == nullptr) {
          impl->Dispatch(incoming->header, reply_endpoint,
                         std::span(incoming->buffer.data.get(), length));
          impl->ReleaseBuffer(std::move(incoming->buffer));
          delete incoming;
        } else if (UCS_PTR_IS_ERR(request)) {
          impl->ReleaseBuffer(std::move(incoming->buffer));
          delete incoming;
        }
      } catch (const std::bad_alloc&) {
        // Returning an error rejects the message; the sender's send fails.
        return UCS_ERR_NO_MEMORY;
      }
      return UCS_INPROGRESS;
    }
    impl->Dispatch(*decoded, reply_endpoint, AsBytes(data, length));
    return UCS_OK;
  }

  void Dispatch(const FrameHeader& header, ucp_ep_h reply_endpoint,
                std::span<const std::byte> payload) noexcept {
    try {
      switch (header.kind) {
        case FrameKind::kRequest: ServeRequest(header, reply_endpoint, payload); break;
        case FrameKind::kResponse:
          CompleteCall(header.request_id, Bytes(payload.begin(), payload.end()));
          break;
        case FrameKind::kErrorResponse:
          CompleteCall(header.request_id, DecodeError(payload));
          break;
        case FrameKind::kOneWay: ServeOneWay(header, payload); break;
        case FrameKind::kBatch: ServeBatch(header, payload); break;
      }
    } catch (const std::exception&) {
      // A handler threw through its Result contract, or memory ran out; the
      // caller then sees its timeout rather than a crashed process.
    }
  }

  void CompleteCall(std::uint64_t id, Result<Bytes> result) {
    std::shared_ptr<PendingCall> call;
    {
      std::lock_guard lock(calls_mutex_);
      auto found = pending_calls_.find(id);
      if (found == pending_calls_.end()) return;  // timed out or failed already
      call = found->second;
      pending_calls_.erase(found);
    }
    call->Complete(std::move(result));
  }

  void ServeRequest(const FrameHeader& header, ucp_ep_h reply_endpoint,
                    std::span<const std::byte> payload) {
    // Built only when needed: describing a rank may ask PMIx, which costs
    // more than serving a small request.
    std::optional<Result<Bytes>> result;
    {
      std::shared_lock lock(handlers_mutex_);
      auto deferred = deferred_handlers_.find(header.method);
      if (deferred != deferred_handlers_.end()) {
        auto handler = deferred->second;
        lock.unlock();
        requests_served_.fetch_add(1);
        auto state = std::make_shared<Responder::State>();
        state->impl = this;
        state->reply_endpoint = reply_endpoint;
        state->header = header;
        handler(header.source_rank, payload, Responder(std::move(state)));
        return;
      }
      auto found = request_handlers_.find(header.method);
      if (found != request_handlers_.end()) {
        lock.unlock();
        result = found->second(header.source_rank, payload);
      }
    }
    if (!result) {
      result = Status::NotFound("no handler for method " + std::to_string(header.method) + " on " +
                                Describe(options_.rank));
    }
    requests_served_.fetch_add(1);
    SendReply(reply_endpoint, header, std::move(*result));
  }

 public:
  // Any thread: UCX runs in multi-thread mode, and the reply endpoint stays
  // open until shutdown (failed endpoints are kept, see DropEndpoint).
  void SendReply(ucp_ep_h reply_endpoint, const FrameHeader& header, Result<Bytes> result) {
    if (reply_endpoint == nullptr || stopping_.load()) return;
    auto reply = std::make_unique<std::pair<std::array<std::byte, kFrameHeaderSize>, Bytes>>();
    reply->first =
        EncodeFrameHeader({.kind = result.ok() ? FrameKind::kResponse : FrameKind::kErrorResponse,
                           .source_rank = options_.rank,
                           .method = header.method,
                           .request_id = header.request_id,
                           .token = options_.token});
    reply->second = result.ok() ? std::move(result).value() : EncodeError(result.status());
    if (ShouldHandOff()) {
      PostedMessage message;
      message.kind = PostedKind::kReply;
      message.reply_endpoint = reply_endpoint;
      message.reply = std::move(reply);
      Enqueue(std::move(message));
      return;
    }
    TransmitReply(reply_endpoint, std::move(reply));
    // A reply sent from outside the progress thread needs the worker woken
    // so that the progress thread drives it.
    if (!tls_on_progress_thread && !tls_in_ucx_callback) ucp_worker_signal(worker_->handle());
  }

  void TransmitReply(
      ucp_ep_h reply_endpoint,
      std::unique_ptr<std::pair<std::array<std::byte, kFrameHeaderSize>, Bytes>> reply) {
    auto* context = new SendContext{this, nullptr, std::move(reply)};
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = &Impl::OnSendComplete;
    param.user_data = context;
    const ucs_status_ptr_t request =
        ucp_am_send_nbx(reply_endpoint, kActiveMessageId, context->reply->first.data(),
                        context->reply->first.size(), context->reply->second.data(),
                        context->reply->second.size(), &param);
    if (request == nullptr || UCS_PTR_IS_ERR(request)) delete context;
  }

 private:
  void ServeBatch(const FrameHeader& header, std::span<const std::byte> payload) {
    FrameHeader single = header;
    single.kind = FrameKind::kOneWay;
    const Status delivered = ForEachBatchedMessage(
        payload, [&](std::uint32_t method, std::span<const std::byte> message) {
          single.method = method;
          ServeOneWay(single, message);
        });
    if (delivered.ok()) {
      batches_received_.fetch_add(1);
    } else {
      malformed_frames_.fetch_add(1);
    }
  }

  void ServeOneWay(const FrameHeader& header, std::span<const std::byte> payload) {
    std::shared_lock lock(handlers_mutex_);
    auto found = one_way_handlers_.find(header.method);
    if (found == one_way_handlers_.end()) return;
    lock.unlock();
    found->second(header.source_rank, payload);
    requests_served_.fetch_add(1);
  }

  TransportOptions options_;
  std::shared_ptr<UcxWorker> worker_;
  int event_fd_ = -1;
  std::thread progress_thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::uint64_t> next_request_id_{1};
  std::chrono::steady_clock::time_point last_liveness_probe_{};  // progress thread only
  std::atomic<int> spinning_waiters_{0};
  std::atomic<bool> progress_thread_sleeping_{false};
  // The progress thread waits on park_changed_ while another thread drives
  // the worker (spinning_waiters_ > 0).
  std::atomic<bool> progress_thread_parked_{false};
  // Threads in ProgressHere (counted in spinning_waiters_ too).
  std::atomic<int> driving_threads_{0};
  std::mutex park_mutex_;
  std::condition_variable park_changed_;
  // Held while posted messages are handed to UCX (by the progress thread,
  // or by a thread that sends its own message directly).
  std::mutex send_mutex_;
  std::mutex outbox_mutex_;
  std::vector<PostedMessage> outbox_;  // guarded by outbox_mutex_
  // True while outbox_ may hold messages: lets the progress thread skip the
  // lock when nothing was posted.
  std::atomic<bool> outbox_filled_{false};
  std::atomic<bool> endpoints_to_close_{false};
  std::mutex pool_mutex_;
  std::vector<Buffer> buffer_pool_;
  std::size_t pooled_bytes_ = 0;  // guarded by pool_mutex_

  std::shared_mutex handlers_mutex_;
  std::unordered_map<std::uint32_t, RequestHandler> request_handlers_;
  std::unordered_map<std::uint32_t, OneWayHandler> one_way_handlers_;
  std::unordered_map<std::uint32_t, DeferredRequestHandler> deferred_handlers_;

  std::mutex calls_mutex_;
  std::unordered_map<std::uint64_t, std::shared_ptr<PendingCall>> pending_calls_;

  std::mutex endpoints_mutex_;
  std::map<std::uint32_t, EndpointState> endpoints_;
  std::vector<ucp_ep_h> closing_;
  std::vector<std::unique_ptr<ErrorHandlerContext>> error_contexts_;

  std::atomic<std::uint64_t> requests_served_{0};
  std::atomic<std::uint64_t> batches_received_{0};
  std::atomic<std::uint64_t> rejected_frames_{0};
  std::atomic<std::uint64_t> malformed_frames_{0};
};

Result<std::unique_ptr<Transport>> Transport::Create(TransportOptions options) {
  auto context = UcxContext::Create(options.keepalive_interval);
  if (!context.ok()) return context.status();
  auto worker = UcxWorker::Create(*context);
  if (!worker.ok()) return worker.status();
  return Create(std::move(options), *worker);
}

Result<std::unique_ptr<Transport>> Transport::Create(TransportOptions options,
                                                     std::shared_ptr<UcxWorker> worker) {
  auto impl = std::make_unique<Impl>(std::move(options), std::move(worker));
  SRAY_RETURN_IF_ERROR(impl->Start());
  return std::unique_ptr<Transport>(new Transport(std::move(impl)));
}

Transport::Transport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Transport::~Transport() = default;

std::uint32_t Transport::rank() const {
  return impl_->rank();
}
Result<Bytes> Transport::LocalAddress(bool network_only) const {
  return impl_->LocalAddress(network_only);
}
void Transport::RegisterRequestHandler(std::uint32_t method, RequestHandler handler) {
  impl_->RegisterRequestHandler(method, std::move(handler));
}
void Transport::RegisterOneWayHandler(std::uint32_t method, OneWayHandler handler) {
  impl_->RegisterOneWayHandler(method, std::move(handler));
}
bool Transport::ProgressHere(const std::function<bool()>& done, std::chrono::microseconds spin) {
  return impl_->ProgressHere(done, spin);
}

void Transport::Post(std::uint32_t rank, std::uint32_t method, Bytes payload, bool send_here) {
  impl_->Post(rank, method, std::move(payload), send_here);
}
void Transport::RegisterDeferredRequestHandler(std::uint32_t method,
                                               DeferredRequestHandler handler) {
  impl_->RegisterDeferredRequestHandler(method, std::move(handler));
}

Responder::State::~State() {
  if (!answered.exchange(true)) {
    impl->SendReply(reply_endpoint, header,
                    Status::Internal("the request was dropped without an answer"));
  }
}

void Responder::Reply(Result<Bytes> result) const {
  if (state_->answered.exchange(true)) return;
  state_->impl->SendReply(state_->reply_endpoint, state_->header, std::move(result));
}
Result<Bytes> Transport::Call(std::uint32_t rank, std::uint32_t method,
                              std::span<const std::byte> payload,
                              std::optional<std::chrono::milliseconds> timeout) {
  return impl_->Call(rank, method, payload, timeout);
}
void Transport::CallAsync(std::uint32_t rank, std::uint32_t method,
                          std::span<const std::byte> payload,
                          std::function<void(Result<Bytes>)> done) {
  impl_->CallAsync(rank, method, payload, std::move(done));
}
Status Transport::Send(std::uint32_t rank, std::uint32_t method,
                       std::span<const std::byte> payload) {
  return impl_->Send(rank, method, payload);
}
Result<std::unique_ptr<RegisteredMemory>> Transport::Register(void* address, std::size_t length) {
  return impl_->Register(address, length);
}
Status Transport::Pull(std::uint32_t rank, std::uint64_t remote_address,
                       std::span<const std::byte> packed_key, void* local, std::size_t length,
                       std::optional<std::chrono::milliseconds> timeout) {
  return impl_->Pull(rank, remote_address, packed_key, local, length, timeout);
}
TransportStatistics Transport::statistics() const {
  return impl_->statistics();
}

}  // namespace sray::transport
