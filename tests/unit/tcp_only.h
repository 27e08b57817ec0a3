#pragma once

// UCX reads UCX_TLS when a context is made: tests whose peer must stop
// mattering to UCX's progress (a stopped process; on shared memory UCX reads
// a stopped peer's memory by itself) or whose connection must break later
// (on shared memory a connect to an ended worker fails at once) make their
// contexts and transports over TCP. TCP only while this lives, then as it was.

#include <cstdlib>
#include <optional>
#include <string>

namespace sray::testing {

class TcpOnlyWhileStarting {
 public:
  TcpOnlyWhileStarting() {
    if (const char* value = std::getenv("UCX_TLS")) before_ = value;
    ::setenv("UCX_TLS", "tcp,self", 1);
  }
  ~TcpOnlyWhileStarting() {
    if (before_) {
      ::setenv("UCX_TLS", before_->c_str(), 1);
    } else {
      ::unsetenv("UCX_TLS");
    }
  }
  TcpOnlyWhileStarting(const TcpOnlyWhileStarting&) = delete;
  TcpOnlyWhileStarting& operator=(const TcpOnlyWhileStarting&) = delete;

 private:
  std::optional<std::string> before_;
};

}  // namespace sray::testing
