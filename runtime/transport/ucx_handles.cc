#include "transport/ucx_handles.h"

#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include "transport/ucx_status.h"

namespace sray::transport {
namespace {
constexpr std::chrono::milliseconds kCancelTime{200};
}  // namespace

void SetUcxEnvironmentDefaults() {
  // Endpoints ask for peer-failure detection; without these UCX 1.13 drops
  // the shared-memory transports ("no peer failure handler") and processes
  // on one node would talk over TCP loopback. They are transport settings,
  // which ucp_config_modify rejects, so they go through the environment
  // (never overriding the user's), before UCX reads it.
  // Both front ends already export them to every task (with UCX's
  // unused-variable warning off, which UCX reads when it is loaded); this
  // covers processes started some other way.
  setenv("UCX_POSIX_ERROR_HANDLING", "y", 0);
  setenv("UCX_SYSV_ERROR_HANDLING", "y", 0);
  // Smaller first receive pools: jobsetup/task_environment.h says why.
  setenv("UCX_POSIX_RX_BUFS_GROW", "128", 0);
  setenv("UCX_SYSV_RX_BUFS_GROW", "128", 0);
}

Result<std::shared_ptr<UcxContext>> UcxContext::Create(const std::string& keepalive_interval) {
  SetUcxEnvironmentDefaults();
  InstallUcxLogCapture();
  ucp_config_t* config = nullptr;
  SRAY_RETURN_IF_ERROR(
      FromUcs(ucp_config_read(nullptr, nullptr, &config), "cannot read UCX configuration")
          .WithRemedy("check the UCX_* variables in the environment"));
  // Our defaults; a user's explicit UCX_* variable always wins.
  auto set_default = [config](const char* name, const std::string& value) {
    const std::string variable = std::string("UCX_") + name;
    if (std::getenv(variable.c_str()) == nullptr)
      (void)ucp_config_modify(config, name, value.c_str());
  };
  if (!keepalive_interval.empty()) set_default("KEEPALIVE_INTERVAL", keepalive_interval);

  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 1;
  ucp_context_h handle = nullptr;
  const ucs_status_t status = ucp_init(&params, config, &handle);
  ucp_config_release(config);
  SRAY_RETURN_IF_ERROR(FromUcs(status, "cannot initialise UCX")
                           .WithRemedy("check UCX_TLS and that the UCX transports are installed"));
  return std::shared_ptr<UcxContext>(new UcxContext(handle));
}

UcxContext::~UcxContext() {
  if (abandoned_) return;
  ucp_cleanup(handle_);
}

Result<std::shared_ptr<UcxWorker>> UcxWorker::Create(std::shared_ptr<UcxContext> context) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_MULTI;
  ucp_worker_h handle = nullptr;
  // The worker's receive FIFOs are the mm mappings of this process that
  // appear while it is made and check out as FIFOs it owns. One worker is
  // made at a time: a process with several (tests) has the others' FIFOs,
  // and the FIFOs of its own it attached to as a sender, among the earlier
  // mappings, by identity.
  static std::mutex creation_mutex;
  std::unique_lock creation(creation_mutex);
  const std::optional<FifoLayouts> layouts = RepairableFifoLayouts();
  std::set<std::string> earlier;
  if (layouts) {
    for (const FifoMapping& mapping : FindSharedMemoryMappings()) earlier.insert(mapping.identity);
  }
  SRAY_RETURN_IF_ERROR(FromUcs(ucp_worker_create(context->handle(), &params, &handle),
                               "cannot create a UCX worker"));
  std::shared_ptr<UcxWorker> worker(new UcxWorker(std::move(context), handle));
  if (layouts) {
    for (const FifoMapping& mapping : FindSharedMemoryMappings()) {
      if (!earlier.insert(mapping.identity).second) continue;
      auto fifo = SharedMemoryFifo::Open(mapping, mapping.posix ? layouts->posix : layouts->sysv);
      if (fifo) worker->receive_fifos_.push_back(*fifo);
    }
  }
  return worker;
}

UcxWorker::~UcxWorker() {
  if (abandoned_) return;
  ucp_worker_destroy(handle_);
}

bool UcxWorker::Quiesce(std::chrono::milliseconds limit) {
  ucp_request_param_t param{};
  const ucs_status_ptr_t request = ucp_worker_flush_nbx(handle_, &param);
  if (request == nullptr) return true;
  if (UCS_PTR_IS_ERR(request)) return false;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (ucp_request_check_status(request) == UCS_INPROGRESS &&
         std::chrono::steady_clock::now() < deadline) {
    ucp_worker_progress(handle_);
  }
  const bool finished = ucp_request_check_status(request) != UCS_INPROGRESS;
  ucp_request_free(request);  // an unfinished one is released with the worker, or never
  return finished;
}

void UcxWorker::Abandon() {
  abandoned_ = true;
  context_->Abandon();
}

Result<std::vector<std::byte>> UcxWorker::Address(bool network_only) const {
  ucp_worker_attr_t attributes{};
  attributes.field_mask = UCP_WORKER_ATTR_FIELD_ADDRESS | UCP_WORKER_ATTR_FIELD_ADDRESS_FLAGS;
  attributes.address_flags = network_only ? UCP_WORKER_ADDRESS_FLAG_NET_ONLY : 0;
  SRAY_RETURN_IF_ERROR(
      FromUcs(ucp_worker_query(handle_, &attributes), "cannot query the UCX worker address"));
  const auto* begin = reinterpret_cast<const std::byte*>(attributes.address);
  std::vector<std::byte> address(begin, begin + attributes.address_length);
  ucp_worker_release_address(handle_, attributes.address);
  return address;
}

Result<std::unique_ptr<UcxEndpoint>> UcxEndpoint::Connect(std::shared_ptr<UcxWorker> worker,
                                                          std::span<const std::byte> address,
                                                          std::string_view peer,
                                                          ErrorHandler on_error,
                                                          LongOperations* long_operations) {
  auto error_context = std::make_unique<ErrorContext>();
  error_context->handler = std::move(on_error);
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(address.data());
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &UcxEndpoint::OnError;
  params.err_handler.arg = error_context.get();
  ucp_ep_h handle = nullptr;
  // A peer that ended a moment ago fails the connect; the caller knows it
  // is gone and words the failure, so UCX's own lines go into the Status.
  UcxLogCapture capture;
  ucs_status_t created = UCS_OK;
  {
    std::optional<LongOperations::Scope> long_operation;
    if (long_operations != nullptr) long_operation.emplace(*long_operations);
    created = ucp_ep_create(worker->handle(), &params, &handle);
  }
  SRAY_RETURN_IF_ERROR(FromUcs(created, "cannot connect to " + std::string(peer), capture));
  // Errors of a connect that still succeeded have no Status to go into.
  if (!capture.messages().empty()) {
    std::fprintf(stderr, "sray: UCX, connecting to %.*s: %s\n", static_cast<int>(peer.size()),
                 peer.data(), capture.messages().c_str());
  }
  return std::unique_ptr<UcxEndpoint>(
      new UcxEndpoint(std::move(worker), std::move(error_context), handle));
}

void UcxEndpoint::OnError(void* arg, ucp_ep_h endpoint, ucs_status_t status) noexcept {
  auto* context = static_cast<ErrorContext*>(arg);
  context->failure.store(status == UCS_OK ? UCS_ERR_ENDPOINT_TIMEOUT : status,
                         std::memory_order_release);
  context->handler(endpoint, status);
}

UcxEndpoint::~UcxEndpoint() {
  if (handle_ == nullptr) return;
  BeginClose(/*force=*/true);
  const auto now = std::chrono::steady_clock::now();
  FinishClose(now, now + kCancelTime);  // forced: finishes at once, or is left to the worker
}

bool UcxEndpoint::CloseAll(std::vector<std::shared_ptr<UcxEndpoint>> endpoints,
                           const std::vector<bool>& failed, std::chrono::milliseconds flush_for) {
  for (std::size_t index = 0; index < endpoints.size(); ++index) {
    // A failed peer sees no orderly disconnect anyway: forced, not flushed.
    endpoints[index]->BeginClose(/*force=*/index < failed.size() && failed[index]);
  }
  const auto deadline = std::chrono::steady_clock::now() + flush_for;
  const auto cancel_deadline = deadline + kCancelTime;  // shared: not 200 ms per endpoint
  bool closed = true;
  for (auto& endpoint : endpoints) closed = endpoint->FinishClose(deadline, cancel_deadline) && closed;
  return closed;
}

void UcxEndpoint::BeginClose(bool force) {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  const ucs_status_ptr_t request = ucp_ep_close_nbx(handle_, &param);
  handle_ = nullptr;
  close_request_ = (request != nullptr && !UCS_PTR_IS_ERR(request)) ? request : nullptr;
}

bool UcxEndpoint::FinishClose(std::chrono::steady_clock::time_point flush_deadline,
                              std::chrono::steady_clock::time_point cancel_deadline) {
  if (close_request_ == nullptr) return true;
  const ucp_worker_h worker = worker_->handle();
  while (ucp_request_check_status(close_request_) == UCS_INPROGRESS &&
         std::chrono::steady_clock::now() < flush_deadline) {
    ucp_worker_progress(worker);
  }
  if (ucp_request_check_status(close_request_) == UCS_INPROGRESS) {
    // UCX 1.13 cancels only tag receives, not a close: one to a peer that
    // died may never finish (under kill -9 of peers an unbounded wait here
    // once spun for ever). Bounded, then left to the worker, which the
    // caller then does not destroy.
    ucp_request_cancel(worker, close_request_);
    while (ucp_request_check_status(close_request_) == UCS_INPROGRESS &&
           std::chrono::steady_clock::now() < cancel_deadline) {
      ucp_worker_progress(worker);
    }
  }
  const bool closed = ucp_request_check_status(close_request_) != UCS_INPROGRESS;
  ucp_request_free(close_request_);
  close_request_ = nullptr;
  return closed;
}

Result<std::unique_ptr<RegisteredMemory>> RegisteredMemory::Map(
    std::shared_ptr<UcxWorker> worker, void* address, std::size_t length,
    const std::optional<SharedFileRegion>& file) {
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  params.address = address;
  params.length = length;
  ucp_mem_h memory = nullptr;
  const ucp_context_h context = worker->context()->handle();
  SRAY_RETURN_IF_ERROR(FromUcs(ucp_mem_map(context, &params, &memory),
                               "cannot register " + std::to_string(length) + " bytes with UCX"));
  void* packed = nullptr;
  std::size_t packed_length = 0;
  const ucs_status_t status = ucp_rkey_pack(context, memory, &packed, &packed_length);
  if (status != UCS_OK) {
    ucp_mem_unmap(context, memory);
    return FromUcs(status, "cannot pack the remote key of registered memory");
  }
  const auto* begin = static_cast<const std::byte*>(packed);
  MemoryKey key{.ucx_key = Bytes(begin, begin + packed_length),
                .address = reinterpret_cast<std::uintptr_t>(address),
                .length = length,
                .file = std::nullopt};
  ucp_rkey_buffer_release(packed);
  // Without a readable boot id or a file that stat() finds, peers on this
  // host pull through UCX like any other.
  struct stat file_status {};
  if (file && !ThisHostId().empty() && ::stat(file->path.c_str(), &file_status) == 0) {
    key.file = SharedFileOfMemory{.host = ThisHostId(),
                                  .path = file->path,
                                  .device = file_status.st_dev,
                                  .inode = file_status.st_ino,
                                  .offset = file->offset};
  }
  return std::unique_ptr<RegisteredMemory>(
      new RegisteredMemory(std::move(worker), memory, address, length, EncodeMemoryKey(key)));
}

RegisteredMemory::~RegisteredMemory() {
  ucp_mem_unmap(worker_->context()->handle(), memory_);
}

Result<std::unique_ptr<RemoteKey>> RemoteKey::Unpack(ucp_ep_h endpoint,
                                                     std::span<const std::byte> ucx_key) {
  if (ucx_key.empty()) return Status::InvalidArgument("cannot unpack an empty remote memory key");
  ucp_rkey_h handle = nullptr;
  SRAY_RETURN_IF_ERROR(FromUcs(ucp_ep_rkey_unpack(endpoint, ucx_key.data(), &handle),
                               "cannot unpack a remote memory key")
                           .WithRemedy("the key must come from the same job's RegisteredMemory"));
  return std::unique_ptr<RemoteKey>(new RemoteKey(handle));
}

RemoteKey::~RemoteKey() {
  ucp_rkey_destroy(handle_);
}

}  // namespace sray::transport
