#pragma once

// Data-parallel LibTorch training, in Ray Train's vocabulary, for C++:
//
//   void TrainLoop(const std::map<std::string, double>& config) {
//     auto model = sray::train::PrepareModel(MakeModel());      // broadcast, gradient sync
//     sray::train::DistributedSampler sampler(dataset.size().value());
//     auto loader = torch::data::make_data_loader(dataset, sampler, 64);
//     for (int epoch = 0; epoch < 3; ++epoch) {
//       sampler.set_epoch(epoch);
//       for (auto& batch : *loader) { ...; loss.backward(); optimizer.step(); }
//       sray::train::Report({{"loss", loss_value}}, checkpoint);
//     }
//   }
//   SRAY_REMOTE(TrainLoop);
//
//   sray::train::TorchTrainer trainer(TrainLoop, config, {.num_workers = 2});
//   sray::train::Result result = trainer.Fit();
//
// Link sray::train (CMake: find_package(sray) and target_link_libraries(app
// sray::train)), which brings LibTorch with it.

#include "sray/train/checkpoint.h"
#include "sray/train/config.h"
#include "sray/train/context.h"
#include "sray/train/prepare.h"
#include "sray/train/result.h"
#include "sray/train/sampler.h"
#include "sray/train/trainer.h"
