#pragma once

// TorchTrainer runs train_loop_per_worker on num_workers training workers
// (actors in one placement group), each holding resources_per_worker, wired
// into one LibTorch process group (Gloo on CPU, NCCL with use_gpu), and
// collects rank 0's reports. When a worker fails (its process dies, its node
// is lost, the loop throws) the whole group is ended and, while
// max_failures allows, started again; workers then resume from the latest
// checkpoint (GetCheckpoint()).
//
// The loop is a function `void(const Config&)` registered with SRAY_REMOTE;
// Config is any msgpack type (a struct with MSGPACK_DEFINE, or
// std::map<std::string, double>). Fit runs on the driver only.

#include <optional>
#include <string>
#include <utility>

#include "sray/internal/function_registry.h"
#include "sray/internal/serialization.h"
#include "sray/train/checkpoint.h"
#include "sray/train/config.h"
#include "sray/train/result.h"

namespace sray::train {
namespace internal {
struct TrainingRequest {
  std::string function;       // the loop's registered name
  std::string config;         // its argument, serialized
  ScalingConfig scaling;
  RunConfig run;
  TorchConfig torch;
  std::optional<Checkpoint> resume_from;
};
// Throws TrainingFailedError, sray::ConfigError (bad configuration),
// sray::InfeasibleResourcesError (no layout of the job could hold the
// workers), or sray::Error when the driver cannot store a report (a full disk).
Result Fit(const TrainingRequest& request);
}  // namespace internal

template <typename Config>
class TorchTrainer {
 public:
  using Loop = void (*)(const Config&);
  TorchTrainer(Loop train_loop_per_worker, Config train_loop_config, ScalingConfig scaling_config,
               RunConfig run_config = {}, TorchConfig torch_config = {})
      : loop_(train_loop_per_worker),
        config_(std::move(train_loop_config)),
        scaling_(std::move(scaling_config)),
        run_(std::move(run_config)),
        torch_(std::move(torch_config)) {}

  // Workers start from this checkpoint (GetCheckpoint()) until they report
  // one of their own; see LatestCheckpoint to continue a run that ended.
  TorchTrainer& SetResumeFromCheckpoint(std::optional<Checkpoint> checkpoint) {
    resume_from_ = std::move(checkpoint);
    return *this;
  }

  Result Fit() {
    return internal::Fit({sray::internal::FunctionName(sray::internal::KeyOf(loop_)),
                          sray::internal::Serialize(config_), scaling_, run_, torch_,
                          resume_from_});
  }

 private:
  Loop loop_;
  Config config_;
  ScalingConfig scaling_;
  RunConfig run_;
  TorchConfig torch_;
  std::optional<Checkpoint> resume_from_;
};

}  // namespace sray::train
