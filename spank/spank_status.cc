#include "spank_status.h"

#include <string>

namespace sray::spank {

Status FromSpank(spank_err_t error, std::string_view what) {
  if (error == ESPANK_SUCCESS) return Status::Ok();
  std::string message = std::string(what) + ": " + spank_strerror(error);
  switch (error) {
    case ESPANK_BAD_ARG: return Status::InvalidArgument(std::move(message));
    case ESPANK_ENV_NOEXIST: return Status::NotFound(std::move(message));
    case ESPANK_ENV_EXISTS: return Status::AlreadyExists(std::move(message));
    case ESPANK_NOT_REMOTE:
    case ESPANK_NOT_LOCAL:
    case ESPANK_NOT_AVAIL:
    case ESPANK_NOT_TASK:
    case ESPANK_NOT_EXECD: return Status::Unavailable(std::move(message));
    default: return Status::Internal(std::move(message));
  }
}

}  // namespace sray::spank
