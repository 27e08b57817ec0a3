// The one file that knows LibTorch's c10d and autograd internals, and their
// differences between versions: 1.13 groups derive from c10d::ProcessGroup,
// 2.x ones from c10d::Backend, with the same collective signatures.

#include "train/collectives.h"
#include "train/backends_available.h"
#include "train/member_tag.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <utility>

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/version.h>
#include <torch/csrc/distributed/c10d/Work.hpp>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif
// Debian's LibTorch comes with Gloo's headers; a pip wheel's has none (its
// Gloo is inside libtorch_cpu), and then only the NCCL path is built.
#if __has_include(<gloo/algorithm.h>)
#define SRAY_TRAIN_WITH_GLOO 1
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif
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
#ifndef SRAY_TRAIN_WITH_GLOO
  (void)store, (void)rank, (void)world_size, (void)timeout;
  // Fit refuses such a run first; this stops any other way in.
  throw std::runtime_error("sray: " + MissingBackend(false));
#else
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
#endif
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

// c10d's Store over the run's rendezvous. Waiting is polled here, with a
// pause that grows to 10 ms, so that the actor behind the backend answers
// every call at once and one waiting worker never blocks another's call.
class RendezvousAdapter final : public c10d::Store {
 public:
  RendezvousAdapter(std::shared_ptr<RendezvousBackend> backend, std::chrono::milliseconds timeout)
      : c10d::Store(timeout), backend_(std::move(backend)) {}

  void set(const std::string& key, const std::vector<std::uint8_t>& value) override {
    backend_->Set(key, Text(value));
  }
  std::vector<std::uint8_t> compareSet(const std::string& key, const std::vector<std::uint8_t>& expected,
                                       const std::vector<std::uint8_t>& desired) override {
    return Bytes(backend_->CompareSet(key, Text(expected), Text(desired)));
  }
  std::vector<std::uint8_t> get(const std::string& key) override {
    std::optional<std::vector<std::string>> values;
    Poll({key}, timeout_, [&] { return (values = backend_->GetAll({key})).has_value(); });
    return Bytes(values->front());
  }
  std::int64_t add(const std::string& key, std::int64_t value) override { return backend_->Add(key, value); }
  bool deleteKey(const std::string& key) override { return backend_->Delete(key); }
  bool check(const std::vector<std::string>& keys) override { return backend_->Check(keys); }
  std::int64_t getNumKeys() override { return backend_->NumKeys(); }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    Poll(keys, timeout, [&] { return backend_->Check(keys); });
  }
  // Newer LibTorch asks stores for a copy over the same keys (a pure virtual
  // there; absent in 1.13, where this is a plain member).
  // NOLINTNEXTLINE(modernize-use-override,cppcoreguidelines-explicit-virtual-functions)
  c10::intrusive_ptr<c10d::Store> clone() {
    return c10::make_intrusive<RendezvousAdapter>(backend_, timeout_);
  }

 private:
  static std::string Text(const std::vector<std::uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }
  static std::vector<std::uint8_t> Bytes(const std::string& text) { return {text.begin(), text.end()}; }

  template <typename Probe>
  static void Poll(const std::vector<std::string>& keys, std::chrono::milliseconds timeout, Probe&& probe) {
    const auto start = std::chrono::steady_clock::now();
    auto pause = std::chrono::microseconds(50);
    while (!probe()) {
      if (timeout != kNoTimeout && std::chrono::steady_clock::now() - start >= timeout) {
        std::string names;
        for (const std::string& key : keys) names += (names.empty() ? "" : ", ") + key;
        TORCH_CHECK(false, "sray: the training group's rendezvous timed out after ", timeout.count(),
                    " ms waiting for ", names, ": a worker of the group did not join; see the workers' logs");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(10));
    }
  }

  std::shared_ptr<RendezvousBackend> backend_;
};

}  // namespace

struct Collectives::Group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<GroupBase> backend;
  bool on_gpu = false;  // NCCL: collectives take CUDA tensors
};

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

bool GlooAvailable() {
#ifdef SRAY_TRAIN_WITH_GLOO
  return true;
#else
  return false;
#endif
}

bool NcclAvailable() {
#ifdef SRAY_TRAIN_WITH_NCCL
  return true;
#else
  return false;
#endif
}

std::string MissingBackend(bool use_gpu) {
  if (use_gpu && !NcclAvailable()) {
    return "ScalingConfig::use_gpu needs sray's NCCL path, and this sray was built without it "
           "(LibTorch without CUDA, or SRAY_WITH_CUDA=OFF): rebuild against a CUDA LibTorch with "
           "-DSRAY_WITH_CUDA=ON, or set use_gpu=false";
  }
  if (!use_gpu && !GlooAvailable()) {
    return "training on CPU needs Gloo, and this sray was built against a LibTorch without Gloo's "
           "headers (a pip wheel ships none): rebuild against Debian's LibTorch (libtorch-dev "
           "libgloo-dev) or with that LibTorch's Gloo headers on the include path, or set "
           "ScalingConfig::use_gpu=true";
  }
  return {};
}

Collectives::Collectives(std::unique_ptr<Group> group, int rank, int world_size)
    : group_(std::move(group)), rank_(rank), world_size_(world_size) {}

Collectives::~Collectives() = default;

std::unique_ptr<Collectives> Collectives::Connect(const GroupOptions& options) {
  if (!options.rendezvous) throw std::invalid_argument("sray: a training group needs a rendezvous");
  c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<RendezvousAdapter>(options.rendezvous, options.timeout);
  auto group = std::make_unique<Group>();
  group->store = store;
  if (options.use_nccl) {
#ifdef SRAY_TRAIN_WITH_NCCL
    group->backend = MakeNccl(store, options.rank, options.world_size, options.timeout);
    group->on_gpu = true;
#else
    throw std::runtime_error("sray: " + MissingBackend(true));
#endif
  } else {
    group->backend = MakeGloo(store, options.rank, options.world_size, options.timeout);
  }
  std::unique_ptr<Collectives> collectives(new Collectives(std::move(group), options.rank, options.world_size));
  if (!options.group_secret.empty()) collectives->VerifyMembers(options.group_secret);
  return collectives;
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

void Collectives::VerifyMembers(const std::string& group_secret) {
  if (world_size_ < 2) return;
  constexpr auto kTagBytes = static_cast<std::int64_t>(sizeof(MemberTag));
  const auto world = static_cast<std::int64_t>(world_size_);
  at::Tensor sent = at::empty({world * kTagBytes}, at::TensorOptions().dtype(at::kByte));
  for (int peer = 0; peer < world_size_; ++peer) {
    const MemberTag tag = TagFor(group_secret, rank_, peer);
    std::memcpy(sent.data_ptr<std::uint8_t>() + peer * kTagBytes, tag.data(), tag.size());
  }
  const c10::Device device = group_->on_gpu ? c10::Device(c10::DeviceType::CUDA, 0)
                                            : c10::Device(c10::DeviceType::CPU);
  at::Tensor outgoing = sent.to(device);
  at::Tensor incoming = at::empty_like(outgoing);
  std::vector<std::int64_t> equal_splits;
  Wait(group_->backend->alltoall_base(incoming, outgoing, equal_splits, equal_splits));
  const at::Tensor received = incoming.cpu();
  for (int peer = 0; peer < world_size_; ++peer) {
    if (peer == rank_) continue;
    const MemberTag expected = TagFor(group_secret, peer, rank_);
    if (std::memcmp(received.data_ptr<std::uint8_t>() + peer * kTagBytes, expected.data(), expected.size()) != 0) {
      throw std::runtime_error("sray: the training group's connection from rank " + std::to_string(peer) +
                               " to rank " + std::to_string(rank_) +
                               " does not carry that worker's member tag: another process took its place "
                               "(or the workers disagree on the group); the run stops before any tensor "
                               "crosses it. Check for other users' processes on the nodes' ports");
    }
  }
}

GradientHook::GradientHook(const at::Tensor& parameter, std::function<void()> ready) {
  std::shared_ptr<torch::autograd::Node> accumulator = torch::autograd::impl::grad_accumulator(parameter);
  if (!accumulator) {
    throw std::invalid_argument(
        "sray: PrepareModel cannot watch a parameter's gradient: it is not a leaf tensor that "
        "requires grad: pass a module whose parameters are its own, with requires_grad set");
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
