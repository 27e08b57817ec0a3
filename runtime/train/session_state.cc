#include "train/session_state.h"

#include <mutex>
#include <utility>

#include "sray/errors.h"

namespace sray::train::internal {
namespace {
std::mutex session_mutex;
std::shared_ptr<Session> current_session;
}  // namespace

void SetCurrentSession(std::shared_ptr<Session> session) {
  std::lock_guard lock(session_mutex);
  current_session = std::move(session);
}

std::shared_ptr<Session> CurrentSessionOrNull() {
  std::lock_guard lock(session_mutex);
  return current_session;
}

Session& CurrentSession() {
  std::lock_guard lock(session_mutex);
  if (!current_session) {
    throw Error(
        "sray: this is not a training worker: GetContext, Report, GetCheckpoint and PrepareModel "
        "work only inside train_loop_per_worker run by TorchTrainer::Fit");
  }
  return *current_session;
}

}  // namespace sray::train::internal
