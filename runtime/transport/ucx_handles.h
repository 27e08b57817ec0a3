#pragma once

// One RAII class per UCX handle. Children hold a shared_ptr to their parent
// (worker -> context, endpoint/memory -> worker), so destruction order is
// right whatever order owners release them in.
//
// Thread-safety: the worker is created in UCS_THREAD_MODE_MULTI, so UCX calls
// on these handles may come from any thread; the classes add no state of
// their own beyond the handle (and an endpoint's error handler).

#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "transport/long_operations.h"
#include "transport/memory_key.h"
#include "transport/shared_memory_fifos.h"

namespace sray::transport {

// Sets the UCX variables sray needs in this process's environment (never
// over the user's). Create calls it; call it first on the main thread when
// Create runs on another thread while this one may read the environment.
void SetUcxEnvironmentDefaults();

class UcxContext {
 public:
  // `keepalive_interval` sets how soon a silent dead peer is noticed on
  // transports without connection state (an explicit UCX_KEEPALIVE_INTERVAL wins).
  static Result<std::shared_ptr<UcxContext>> Create(const std::string& keepalive_interval);
  ~UcxContext();
  UcxContext(const UcxContext&) = delete;
  UcxContext& operator=(const UcxContext&) = delete;

  [[nodiscard]] ucp_context_h handle() const { return handle_; }
  // A worker of it is left undestroyed (UcxWorker::Abandon): cleaning up
  // the context under it is not allowed, so it is left too.
  void Abandon() { abandoned_ = true; }

 private:
  explicit UcxContext(ucp_context_h handle) : handle_(handle) {}
  ucp_context_h handle_;
  bool abandoned_ = false;
};

class UcxWorker {
 public:
  static Result<std::shared_ptr<UcxWorker>> Create(std::shared_ptr<UcxContext> context);
  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  [[nodiscard]] ucp_worker_h handle() const { return handle_; }
  [[nodiscard]] const std::shared_ptr<UcxContext>& context() const { return context_; }
  // The worker's address: every transport, or only those that reach other
  // hosts (what a process on another node can use).
  [[nodiscard]] Result<std::vector<std::byte>> Address(bool network_only) const;
  // Before the worker goes: flushes every endpoint, the ones UCX made for
  // replies too, progressing on this thread for up to `limit`; false when
  // that did not finish. No other thread may progress the worker meanwhile.
  bool Quiesce(std::chrono::milliseconds limit);
  // The shared-memory receive FIFOs UCX made for this worker (mapped until
  // the worker is destroyed); empty when repair is off (shared_memory_fifos.h).
  [[nodiscard]] const std::vector<SharedMemoryFifo>& receive_fifos() const {
    return receive_fifos_;
  }
  // Leaves the worker (and its context) to the process's end instead of
  // destroying it. For a worker whose peers died: UCX 1.13 then may hold
  // protocol requests on endpoints it made itself (replies to a process
  // killed meanwhile), which no flush or close reaches, and destroying the
  // worker fails an assertion inside UCX (ucp_ep_destroy_base, proto_reqs)
  // that aborts the process. Seen by scripts/chaos in about 1 run of 20.
  void Abandon();

 private:
  UcxWorker(std::shared_ptr<UcxContext> context, ucp_worker_h handle)
      : context_(std::move(context)), handle_(handle) {}
  std::shared_ptr<UcxContext> context_;
  ucp_worker_h handle_;
  bool abandoned_ = false;  // Abandon: not destroyed
  std::vector<SharedMemoryFifo> receive_fifos_;
};

// A connection to one peer's worker, with UCX's peer-failure detection
// (UCP_ERR_HANDLING_MODE_PEER). It owns what its error callback receives, so
// that stays valid for as long as UCX may call it: until the endpoint is
// closed, which the destructor does (forcibly, if nobody closed it before).
// Closing progresses the worker on the calling thread, so an endpoint must
// not be closed or destroyed inside a UCX callback.
class UcxEndpoint {
 public:
  // Runs inside a UCX callback when the peer fails: must be quick, must not
  // throw, and must not close this endpoint (operations on it just fail).
  using ErrorHandler = std::function<void(ucp_ep_h endpoint, ucs_status_t status)>;

  // `peer` names the peer in the error when the connection fails. UCX's
  // connect, which holds the worker's lock throughout, counts in
  // `long_operations` (may be null).
  static Result<std::unique_ptr<UcxEndpoint>> Connect(std::shared_ptr<UcxWorker> worker,
                                                      std::span<const std::byte> address,
                                                      std::string_view peer, ErrorHandler on_error,
                                                      LongOperations* long_operations = nullptr);
  ~UcxEndpoint();
  UcxEndpoint(const UcxEndpoint&) = delete;
  UcxEndpoint& operator=(const UcxEndpoint&) = delete;

  [[nodiscard]] ucp_ep_h handle() const { return handle_; }
  // UCS_OK until UCX reports this endpoint failed; then the status it gave.
  // Set before the error handler runs, so whoever records the endpoint after
  // its handler ran (and found it unknown) still learns of the failure.
  [[nodiscard]] ucs_status_t failure() const {
    return error_context_->failure.load(std::memory_order_acquire);
  }

  // Closes every endpoint of `endpoints` (all of one worker, none used by
  // another thread any more) together: each flushes for up to `flush_for`
  // so its peer sees an orderly disconnect, then whatever is still open is
  // forced. False when some close did not finish (then left to the worker).
  // `failed[i]`: endpoints[i]'s peer failed; it is closed by force.
  static bool CloseAll(std::vector<std::shared_ptr<UcxEndpoint>> endpoints,
                       const std::vector<bool>& failed, std::chrono::milliseconds flush_for);

 private:
  struct ErrorContext {
    ErrorHandler handler;
    std::atomic<ucs_status_t> failure{UCS_OK};
  };
  UcxEndpoint(std::shared_ptr<UcxWorker> worker, std::unique_ptr<ErrorContext> error_context,
              ucp_ep_h handle)
      : worker_(std::move(worker)), error_context_(std::move(error_context)), handle_(handle) {}
  static void OnError(void* arg, ucp_ep_h endpoint, ucs_status_t status) noexcept;
  // The one close path: asks UCX to close (flushing, or forced), then waits
  // until `flush_deadline`, forcing the close by cancelling after it.
  void BeginClose(bool force);
  bool FinishClose(std::chrono::steady_clock::time_point flush_deadline,
                   std::chrono::steady_clock::time_point cancel_deadline);

  std::shared_ptr<UcxWorker> worker_;
  std::unique_ptr<ErrorContext> error_context_;
  ucp_ep_h handle_;                           // null once closed
  ucs_status_ptr_t close_request_ = nullptr;  // while a close is in flight
};

// Registered memory that peers may read with RMA. Unmapped on destruction.
class RegisteredMemory {
 public:
  // `file`: the memory is a shared mapping of that file region; the key
  // then also tells peers on this host where the file is (memory_key.h).
  static Result<std::unique_ptr<RegisteredMemory>> Map(
      std::shared_ptr<UcxWorker> worker, void* address, std::size_t length,
      const std::optional<SharedFileRegion>& file = std::nullopt);
  ~RegisteredMemory();
  RegisteredMemory(const RegisteredMemory&) = delete;
  RegisteredMemory& operator=(const RegisteredMemory&) = delete;

  [[nodiscard]] void* address() const { return address_; }
  [[nodiscard]] std::size_t length() const { return length_; }
  // What a peer needs to read this memory: an encoded MemoryKey.
  [[nodiscard]] std::span<const std::byte> packed_key() const { return packed_key_; }

 private:
  RegisteredMemory(std::shared_ptr<UcxWorker> worker, ucp_mem_h memory, void* address,
                   std::size_t length, std::vector<std::byte> packed_key)
      : worker_(std::move(worker)),
        memory_(memory),
        address_(address),
        length_(length),
        packed_key_(std::move(packed_key)) {}
  std::shared_ptr<UcxWorker> worker_;
  ucp_mem_h memory_;
  void* address_;
  std::size_t length_;
  std::vector<std::byte> packed_key_;
};

// A peer's remote key unpacked for one endpoint.
class RemoteKey {
 public:
  static Result<std::unique_ptr<RemoteKey>> Unpack(ucp_ep_h endpoint,
                                                   std::span<const std::byte> ucx_key);
  ~RemoteKey();
  RemoteKey(const RemoteKey&) = delete;
  RemoteKey& operator=(const RemoteKey&) = delete;

  [[nodiscard]] ucp_rkey_h handle() const { return handle_; }

 private:
  explicit RemoteKey(ucp_rkey_h handle) : handle_(handle) {}
  ucp_rkey_h handle_;
};

}  // namespace sray::transport
