#include "train/allreduce_probe.h"

#include <chrono>
#include <stdexcept>

#include <ATen/ATen.h>

#include "sray/train/context.h"
#include "train/session_state.h"

namespace sray::train::internal {

AllReduceTiming MeasureAllReduce(int steps) {
  Session& session = CurrentSession();
  // One worker has no reducer (nothing to average with): nothing to time.
  if (session.collectives->world_size() == 1) return {};
  if (session.reducers.empty()) throw std::logic_error("MeasureAllReduce needs a model prepared with PrepareModel");
  GradientReducer& reducer = *session.reducers.front();
  Collectives& collectives = *session.collectives;
  AllReduceTiming timing;
  timing.bucket_bytes = reducer.BucketBytes();
  const auto before = reducer.statistics();
  if (before.steps > 0) timing.overlapped_seconds_per_step = before.communication_seconds / static_cast<double>(before.steps);

  using Clock = std::chrono::steady_clock;
  std::vector<at::Tensor> raw;
  for (std::size_t bytes : timing.bucket_bytes) {
    raw.push_back(at::zeros({static_cast<std::int64_t>(bytes / sizeof(float))},
                            at::TensorOptions().dtype(at::kFloat).device(GetContext().GetDevice())));
  }
  auto raw_step = [&] {
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    works.reserve(raw.size());
    for (auto& tensor : raw) works.push_back(collectives.StartAllReduceSum(tensor));
    for (auto& work : works) Collectives::Wait(work);
  };
  reducer.SynchronizeNow();  // warm-up
  raw_step();
  // Interleaved, so that a change in the machine's speed meanwhile affects both alike.
  double reducer_seconds = 0;
  double raw_seconds = 0;
  for (int step = 0; step < steps; ++step) {
    collectives.Barrier();
    auto started = Clock::now();
    reducer.SynchronizeNow();
    reducer_seconds += std::chrono::duration<double>(Clock::now() - started).count();
    collectives.Barrier();
    started = Clock::now();
    raw_step();
    raw_seconds += std::chrono::duration<double>(Clock::now() - started).count();
  }
  timing.reducer_seconds_per_step = reducer_seconds / steps;
  timing.raw_seconds_per_step = raw_seconds / steps;
  return timing;
}

}  // namespace sray::train::internal
