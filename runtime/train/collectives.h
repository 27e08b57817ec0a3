#pragma once

// The process group of one training run, as sray uses it: Gloo on CPU, NCCL
// on GPU when LibTorch was built with CUDA, met through the run's
// RendezvousStore actor (a c10d::Store adapter over RendezvousBackend) and
// checked by member tags, and the autograd hooks the gradient reducer needs. Every difference
// between LibTorch 1.13 (c10d::ProcessGroup) and 2.x (c10d::Backend) is
// inside collectives.cc; nothing else names a c10d type.
//
// Thread-safety: operations are issued from one thread at a time (the
// training loop's, or autograd's during backward); a Work may be waited on
// from any thread.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "train/rendezvous_table.h"

namespace sray::train::internal {

// A port that was free a moment ago on this host, for MASTER_PORT: programs
// that build their own TCPStore there expect it free, as under torchrun.
std::uint16_t PickFreePort();

struct GroupOptions {
  int rank = 0;
  int world_size = 1;
  std::shared_ptr<RendezvousBackend> rendezvous;
  std::string group_secret;  // for VerifyMembers; empty: not checked (tests only)
  std::chrono::milliseconds timeout{300000};
  bool use_nccl = false;
};

class Collectives {
 public:
  // Joins the group and verifies its members; every rank must call it.
  // Throws c10::Error or std::runtime_error naming what failed.
  static std::unique_ptr<Collectives> Connect(const GroupOptions& options);
  // Over an existing store, for tests (c10d::HashStore in one process).
  static std::unique_ptr<Collectives> OverStore(const c10::intrusive_ptr<c10d::Store>& store,
                                                int rank, int world_size,
                                                std::chrono::milliseconds timeout);
  ~Collectives();
  Collectives(const Collectives&) = delete;
  Collectives& operator=(const Collectives&) = delete;

  [[nodiscard]] int rank() const { return rank_; }
  [[nodiscard]] int world_size() const { return world_size_; }

  // Starts summing `tensor` over the group in place; Wait finishes it.
  c10::intrusive_ptr<c10d::Work> StartAllReduceSum(at::Tensor& tensor);
  // Throws (the collective's error) when it failed or timed out.
  static void Wait(const c10::intrusive_ptr<c10d::Work>& work);
  void AllReduceSum(at::Tensor& tensor);
  // Starts copying `root`'s `tensor` into every rank's; Wait finishes it.
  c10::intrusive_ptr<c10d::Work> StartBroadcast(at::Tensor& tensor, int root);
  void Broadcast(at::Tensor& tensor, int root);
  void Barrier();
  // Every rank sends each peer its member tag and checks the one it gets
  // (member_tag.h); throws std::runtime_error naming the peer whose tag is
  // wrong. Collective: every rank calls it with the group's secret.
  void VerifyMembers(const std::string& group_secret);

 private:
  struct Group;
  Collectives(std::unique_ptr<Group> group, int rank, int world_size);
  std::unique_ptr<Group> group_;
  int rank_;
  int world_size_;
};

// Runs `ready` after autograd accumulated a gradient into `parameter`
// (the hook DDP uses); the returned handle removes it when destroyed.
class GradientHook {
 public:
  GradientHook(const at::Tensor& parameter, std::function<void()> ready);
  ~GradientHook();
  GradientHook(const GradientHook&) = delete;
  GradientHook& operator=(const GradientHook&) = delete;
  // False when `parameter`'s accumulator is no longer the hooked one (its
  // dtype or device changed since).
  [[nodiscard]] bool AttachedTo(const at::Tensor& parameter) const;

 private:
  std::shared_ptr<void> accumulator_;  // a torch::autograd::Node
  std::uintptr_t key_ = 0;
};

// Queues `callback` to run when the current backward pass ends (only valid
// inside one, from a hook).
void AtEndOfBackward(std::function<void()> callback);

}  // namespace sray::train::internal
