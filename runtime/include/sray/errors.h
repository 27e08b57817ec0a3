#pragma once

// Typed exceptions of sray's public C++ API. Internals use Status values; the
// API boundary converts a failed Status into one of these, keeping the original
// message (which already says what failed, why, and what to do).

#include <stdexcept>
#include <string>

namespace sray {

// Base of every exception sray throws.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The process was not started by `srun --ray-cluster` or `sray run`, or its
// launch environment is damaged.
class LaunchError : public Error {
 public:
  using Error::Error;
};

// Bad options or configuration.
class ConfigError : public Error {
 public:
  using Error::Error;
};

}  // namespace sray
