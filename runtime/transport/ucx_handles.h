#pragma once

// One RAII class per UCX handle. Children hold a shared_ptr to their parent
// (worker -> context, endpoint/memory -> worker), so destruction order is
// right whatever order owners release them in.
//
// Thread-safety: the worker is created in UCS_THREAD_MODE_MULTI, so UCX calls
// on these handles may come from any thread; the classes add no state of
// their own beyond the handle.

#include <ucp/api/ucp.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace sray::transport {

class UcxContext {
 public:
  // `keepalive_interval` sets how soon a silent dead peer is noticed on
  // transports without connection state (an explicit UCX_KEEPALIVE_INTERVAL wins).
  static Result<std::shared_ptr<UcxContext>> Create(const std::string& keepalive_interval);
  ~UcxContext();
  UcxContext(const UcxContext&) = delete;
  UcxContext& operator=(const UcxContext&) = delete;

  [[nodiscard]] ucp_context_h handle() const { return handle_; }

 private:
  explicit UcxContext(ucp_context_h handle) : handle_(handle) {}
  ucp_context_h handle_;
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

 private:
  UcxWorker(std::shared_ptr<UcxContext> context, ucp_worker_h handle)
      : context_(std::move(context)), handle_(handle) {}
  std::shared_ptr<UcxContext> context_;
  ucp_worker_h handle_;
};

// Registered memory that peers may read with RMA. Unmapped on destruction.
class RegisteredMemory {
 public:
  static Result<std::unique_ptr<RegisteredMemory>> Map(std::shared_ptr<UcxWorker> worker,
                                                       void* address, std::size_t length);
  ~RegisteredMemory();
  RegisteredMemory(const RegisteredMemory&) = delete;
  RegisteredMemory& operator=(const RegisteredMemory&) = delete;

  [[nodiscard]] void* address() const { return address_; }
  [[nodiscard]] std::size_t length() const { return length_; }
  // The packed remote key a peer needs to read this memory.
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
                                                   std::span<const std::byte> packed_key);
  ~RemoteKey();
  RemoteKey(const RemoteKey&) = delete;
  RemoteKey& operator=(const RemoteKey&) = delete;

  [[nodiscard]] ucp_rkey_h handle() const { return handle_; }

 private:
  explicit RemoteKey(ucp_rkey_h handle) : handle_(handle) {}
  ucp_rkey_h handle_;
};

}  // namespace sray::transport
