#include "inherited_signals.h"

#include <csignal>

namespace sray::launcher {
namespace {

enum class Recorded { kNothing, kIgnored, kNotIgnored };
Recorded hang_up = Recorded::kNothing;

bool IgnoredNow(int signal) {
  struct sigaction current {};
  return ::sigaction(signal, nullptr, &current) == 0 && current.sa_handler == SIG_IGN;
}

}  // namespace

void RecordInheritedSignals() {
  hang_up = IgnoredNow(SIGHUP) ? Recorded::kIgnored : Recorded::kNotIgnored;
}

bool HangUpIgnoredAtStart() {
  if (hang_up == Recorded::kNothing) return IgnoredNow(SIGHUP);
  return hang_up == Recorded::kIgnored;
}

}  // namespace sray::launcher
