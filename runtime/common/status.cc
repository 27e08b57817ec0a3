#include "status.h"

#include <cerrno>
#include <cstring>

namespace sray {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kNotFound: return "not found";
    case StatusCode::kAlreadyExists: return "already exists";
    case StatusCode::kPermissionDenied: return "permission denied";
    case StatusCode::kIoError: return "I/O error";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kInternal: return "internal error";
    case StatusCode::kResourceExhausted: return "resource exhausted";
    case StatusCode::kDeadlineExceeded: return "deadline exceeded";
  }
  return "unknown";
}

Status Status::FromCode(StatusCode code, std::string message) {
  switch (code) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kAlreadyExists:
    case StatusCode::kPermissionDenied:
    case StatusCode::kIoError:
    case StatusCode::kUnavailable:
    case StatusCode::kInternal:
    case StatusCode::kResourceExhausted:
    case StatusCode::kDeadlineExceeded: return {code, std::move(message)};
    case StatusCode::kOk: break;
  }
  return Internal(std::move(message));
}

Status Status::FromErrno(int error_number, std::string_view what) {
  std::string message(what);
  message += ": ";
  message += std::strerror(error_number);
  switch (error_number) {
    case ENOENT:
    case ENOTDIR: return NotFound(std::move(message));
    case EEXIST: return AlreadyExists(std::move(message));
    case EACCES:
    case EPERM: return PermissionDenied(std::move(message));
    case EINVAL: return InvalidArgument(std::move(message));
    default: return IoError(std::move(message));
  }
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string message(context);
  message += ": ";
  message += message_;
  return {code_, std::move(message)};
}

Status Status::WithRemedy(std::string_view remedy) const {
  if (ok()) return *this;
  return {code_, message_ + ": " + std::string(remedy)};
}

}  // namespace sray
