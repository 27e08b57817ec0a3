#include "transport/long_operations.h"

namespace sray::transport {

LongOperations::Scope::Scope(LongOperations& operations) : operations_(operations) {
  operations_.running_.fetch_add(1);
}

LongOperations::Scope::~Scope() {
  if (operations_.running_.fetch_sub(1) != 1 || operations_.waiting_.load() == 0) return;
  std::lock_guard lock(operations_.mutex_);
  operations_.ended_.notify_all();
}

bool LongOperations::WaitUntilNone(std::chrono::microseconds limit) {
  std::unique_lock lock(mutex_);
  waiting_.fetch_add(1);
  const bool none = ended_.wait_for(lock, limit, [this] { return running_.load() == 0; });
  waiting_.fetch_sub(1);
  return none;
}

}  // namespace sray::transport
