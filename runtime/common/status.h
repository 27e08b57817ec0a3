#pragma once

// Status carries the outcome of an internal operation. Internals return Status
// or Result<T>; only the public C++ API turns a failed Status into a typed
// exception (see sray/errors.h). Messages follow the user-facing shape
// "what failed: why, and what to do"; front ends prefix them with "sray: ".
//
// Thread-safety: values are immutable once built and safe to share.

#include <cassert>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace sray {

enum class StatusCode {
  kOk,
  kInvalidArgument,
  kNotFound,
  kAlreadyExists,
  kPermissionDenied,
  kIoError,
  kUnavailable,
  kInternal,
  kResourceExhausted,
  kDeadlineExceeded,
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;

  static Status Ok() { return {}; }
  static Status InvalidArgument(std::string message) {
    return {StatusCode::kInvalidArgument, std::move(message)};
  }
  static Status NotFound(std::string message) {
    return {StatusCode::kNotFound, std::move(message)};
  }
  static Status AlreadyExists(std::string message) {
    return {StatusCode::kAlreadyExists, std::move(message)};
  }
  static Status PermissionDenied(std::string message) {
    return {StatusCode::kPermissionDenied, std::move(message)};
  }
  static Status IoError(std::string message) { return {StatusCode::kIoError, std::move(message)}; }
  static Status Unavailable(std::string message) {
    return {StatusCode::kUnavailable, std::move(message)};
  }
  static Status Internal(std::string message) {
    return {StatusCode::kInternal, std::move(message)};
  }
  static Status ResourceExhausted(std::string message) {
    return {StatusCode::kResourceExhausted, std::move(message)};
  }
  static Status DeadlineExceeded(std::string message) {
    return {StatusCode::kDeadlineExceeded, std::move(message)};
  }
  // Rebuilds a status that crossed a process boundary as code and message; an
  // unknown code (a newer peer) or kOk with a message becomes kInternal.
  static Status FromCode(StatusCode code, std::string message);
  // Maps an errno value to the closest code and appends strerror to `what`.
  static Status FromErrno(int error_number, std::string_view what);

  [[nodiscard]] bool ok() const { return code_ == StatusCode::kOk; }
  [[nodiscard]] StatusCode code() const { return code_; }
  [[nodiscard]] const std::string& message() const { return message_; }

  // Prefixes the message with more context: "context: message".
  [[nodiscard]] Status WithContext(std::string_view context) const;
  // Appends what the user can do about it: "message: remedy".
  [[nodiscard]] Status WithRemedy(std::string_view remedy) const;

 private:
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// Either a value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : storage_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : storage_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(storage_).ok() && "a Result needs a value or an error");
  }

  [[nodiscard]] bool ok() const { return std::holds_alternative<T>(storage_); }
  [[nodiscard]] const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(storage_);
  }
  T& value() & { return std::get<T>(storage_); }
  [[nodiscard]] const T& value() const& { return std::get<T>(storage_); }
  [[nodiscard]] T&& value() && { return std::get<T>(std::move(storage_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> storage_;
};

}  // namespace sray

// Returns early from the enclosing function when `expr` yields a failed Status.
#define SRAY_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::sray::Status sray_status_ = (expr);        \
    if (!sray_status_.ok()) return sray_status_; \
  } while (false)
