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

SigpipeDisposition::SigpipeDisposition() {
  (void)::sigaction(SIGPIPE, nullptr, &saved_);
}

void SigpipeDisposition::Restore() const {
  if (saved_.sa_handler == SIG_DFL && (saved_.sa_flags & SA_SIGINFO) == 0) {
    FailWritesToClosedPipes();
    return;
  }
  (void)::sigaction(SIGPIPE, &saved_, nullptr);
}

}  // namespace sray
