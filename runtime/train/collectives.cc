// The one file that knows LibTorch's c10d and autograd internals, and their
// differences between versions: 1.13 groups derive from c10d::ProcessGroup,
// 2.x ones from c10d::Backend, with the same collective signatures.

#include "train/collectives.h"
#include "train/nccl_available.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <utility>

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/version.h>
#ifdef SRAY_TRAIN_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace sray::train::internal {
namespace {

#if TORCH_VERSION_MAJOR >= 2
using GroupBase = c10d::Backend;
#else
using GroupBase = c10d::ProcessGroup;
#endif

c10::intrusive_ptr<GroupBase> MakeGloo(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                       int world_size, std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  // GLOO_SOCKET_IFNAME picks the network as in PyTorch; otherwise the
  // address this host's name resolves to (loopback when it resolves to none).
  if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME"); interface != nullptr && *interface) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(interface));
  } else {
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  // Two threads: one bucket's all-reduce can run while the next is queued.
  options->threads = 2;
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, options);
}

#ifdef SRAY_TRAIN_WITH_NCCL
c10::intrusive_ptr<GroupBase> MakeNccl(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                       int world_size, std::chrono::milliseconds timeout) {
  // Without asynchronous error handling NCCL ignores the timeout and a hung
  // peer blocks forever (1.13 reads the first name, 2.x the second).
  ::setenv("NCCL_ASYNC_ERROR_HANDLING", "1", 0);
  ::setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1", 0);
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world_size, options);
}
#endif

class ReadyHook final : public torch::autograd::FunctionPostHook {
 public:
  explicit ReadyHook(std::function<void()> ready) : ready_(std::move(ready)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    ready_();
    return outputs;
  }

 private:
  std::function<void()> ready_;
};

}  // namespace

struct Collectives::Group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<GroupBase> backend;
};

StoreServer::StoreServer() {
  c10d::TCPStoreOptions options;
  options.port = 0;  // ephemeral: nothing to pick, nothing to collide with
  options.isServer = true;
  options.waitWorkers = false;
  store_ = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
}

StoreServer::~StoreServer() = default;

std::uint16_t StoreServer::port() const {
  return static_cast<const c10d::TCPStore&>(*store_).getPort();
}

std::uint16_t PickFreePort() {
  const int descriptor = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (descriptor < 0) return 0;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  std::uint16_t port = 0;
  if (::bind(descriptor, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      ::getsockname(descriptor, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(descriptor);
  return port;
}

bool NcclAvailable() {
#ifdef SRAY_TRAIN_WITH_NCCL
  return true;
#else
  return false;
#endif
}

Collectives::Collectives(std::unique_ptr<Group> group, int rank, int world_size)
    : group_(std::move(group)), rank_(rank), world_size_(world_size) {}

Collectives::~Collectives() = default;

std::unique_ptr<Collectives> Collectives::Connect(const GroupOptions& options) {
  c10::intrusive_ptr<c10d::Store> base = options.local_store;
  if (!base) {
    c10d::TCPStoreOptions client;
    client.port = options.store_port;
    client.isServer = false;
    client.timeout = options.timeout;
    base = c10::make_intrusive<c10d::TCPStore>(options.store_host, client);
  }
  auto store = c10::make_intrusive<c10d::PrefixStore>(options.key_prefix, base);
  auto group = std::make_unique<Group>();
  group->store = store;
  if (options.use_nccl) {
#ifdef SRAY_TRAIN_WITH_NCCL
    group->backend = MakeNccl(store, options.rank, options.world_size, options.timeout);
#else
    throw std::runtime_error(
        "this sray was built without the NCCL path (LibTorch without CUDA, or "
        "SRAY_WITH_CUDA=OFF): rebuild against a CUDA LibTorch with -DSRAY_WITH_CUDA=ON, or set use_gpu=false");
#endif
  } else {
    group->backend = MakeGloo(store, options.rank, options.world_size, options.timeout);
  }
  return std::unique_ptr<Collectives>(new Collectives(std::move(group), options.rank, options.world_size));
}

std::unique_ptr<Collectives> Collectives::OverStore(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int world_size,
                                                    std::chrono::milliseconds timeout) {
  auto group = std::make_unique<Group>();
  group->store = store;
  group->backend = MakeGloo(store, rank, world_size, timeout);
  return std::unique_ptr<Collectives>(new Collectives(std::move(group), rank, world_size));
}

c10::intrusive_ptr<c10d::Work> Collectives::StartAllReduceSum(at::Tensor& tensor) {
  std::vector<at::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::SUM;
  return group_->backend->allreduce(tensors, options);
}

void Collectives::Wait(const c10::intrusive_ptr<c10d::Work>& work) {
  work->wait();
}

void Collectives::AllReduceSum(at::Tensor& tensor) { Wait(StartAllReduceSum(tensor)); }

c10::intrusive_ptr<c10d::Work> Collectives::StartBroadcast(at::Tensor& tensor, int root) {
  std::vector<at::Tensor> tensors{tensor};
  c10d::BroadcastOptions options;
  options.rootRank = root;
  return group_->backend->broadcast(tensors, options);
}

void Collectives::Broadcast(at::Tensor& tensor, int root) { Wait(StartBroadcast(tensor, root)); }

void Collectives::Barrier() { Wait(group_->backend->barrier()); }

GradientHook::GradientHook(const at::Tensor& parameter, std::function<void()> ready) {
  std::shared_ptr<torch::autograd::Node> accumulator = torch::autograd::impl::grad_accumulator(parameter);
  if (!accumulator) {
    throw std::invalid_argument("a parameter without a gradient accumulator (not a leaf that requires grad)");
  }
  key_ = accumulator->add_post_hook(std::make_unique<ReadyHook>(std::move(ready)));
  accumulator_ = std::move(accumulator);
}

GradientHook::~GradientHook() {
  if (accumulator_) static_cast<torch::autograd::Node*>(accumulator_.get())->del_post_hook(key_);
}

bool GradientHook::AttachedTo(const at::Tensor& parameter) const {
  return torch::autograd::impl::try_get_grad_accumulator(parameter).get() == accumulator_.get();
}

void AtEndOfBackward(std::function<void()> callback) {
  torch::autograd::Engine::get_default_engine().queue_callback(std::move(callback));
}

}  // namespace sray::train::internal
