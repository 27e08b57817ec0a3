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

}  // namespace sray
