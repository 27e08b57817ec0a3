// TorchTrainer::Fit in local mode: refused, naming what to run instead.
// Before, its default storage was "/train" (local mode has no session
// directory): a ConfigError about /train for most users, a directory at the
// root for root.

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "sray/api.h"
#include "sray/errors.h"
#include "sray/train.h"

namespace {

void NoTraining(const std::map<std::string, double>& /*config*/) {}

}  // namespace

SRAY_REMOTE(NoTraining);

namespace {

TEST(TorchTrainerInLocalMode, FitIsRefusedNamingSrayRun) {
  char name[] = "local_mode_fit_test";
  char* arguments[] = {name, nullptr};
  sray::Init(1, arguments, sray::InitOptions{.local_mode = true});
  sray::train::ScalingConfig scaling;
  scaling.num_workers = 1;
  try {
    (void)sray::train::TorchTrainer<std::map<std::string, double>>(NoTraining, {}, scaling).Fit();
    ADD_FAILURE() << "Fit ran in local mode";
  } catch (const sray::ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("sray run -N1"), std::string::npos) << error.what();
  }
  sray::Shutdown();
}

}  // namespace
