#include "common/thread_name.h"

#include <pthread.h>

#include <array>

namespace sray {
namespace {

// The kernel's TASK_COMM_LEN, with its terminating NUL.
constexpr std::size_t kThreadNameBytes = 16;

}  // namespace

void NameThisThread(std::string_view name) {
  const std::string cut(name.substr(0, kThreadNameBytes - 1));
  // Failure leaves the inherited name, which only makes profiles less clear.
  (void)pthread_setname_np(pthread_self(), cut.c_str());
}

std::string ThisThreadName() {
  std::array<char, kThreadNameBytes> name{};
  if (pthread_getname_np(pthread_self(), name.data(), name.size()) != 0) return {};
  return std::string(name.data());
}

}  // namespace sray
