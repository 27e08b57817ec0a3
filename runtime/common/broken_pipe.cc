#include "common/broken_pipe.h"

namespace sray {
namespace {

void DoNothing(int /*signal*/) {}

}  // namespace

void FailWritesToClosedPipes() {
  struct sigaction on_broken_pipe {};
  on_broken_pipe.sa_handler = &DoNothing;
  sigemptyset(&on_broken_pipe.sa_mask);
  on_broken_pipe.sa_flags = SA_RESTART;
  (void)::sigaction(SIGPIPE, &on_broken_pipe, nullptr);
}

SigpipeDispositionKept::SigpipeDispositionKept() {
  (void)::sigaction(SIGPIPE, nullptr, &saved_);
}

SigpipeDispositionKept::~SigpipeDispositionKept() {
  // sa_handler and sa_sigaction share their storage: a null one is the
  // default, whatever the flags say.
  if (saved_.sa_handler == SIG_DFL) {
    FailWritesToClosedPipes();
    return;
  }
  (void)::sigaction(SIGPIPE, &saved_, nullptr);
}

}  // namespace sray
