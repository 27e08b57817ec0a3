#include "transport/ucx_status.h"

#include <string>

namespace sray::transport {

Status FromUcs(ucs_status_t status, std::string_view what) {
  if (status == UCS_OK || status == UCS_INPROGRESS) return Status::Ok();
  std::string message = std::string(what) + ": " + ucs_status_string(status);
  switch (status) {
    case UCS_ERR_INVALID_PARAM: return Status::InvalidArgument(std::move(message));
    case UCS_ERR_NO_ELEM:
    case UCS_ERR_NO_DEVICE: return Status::NotFound(std::move(message));
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_TIMED_OUT:
    case UCS_ERR_CANCELED:
    case UCS_ERR_REJECTED:
    case UCS_ERR_NOT_CONNECTED: return Status::Unavailable(std::move(message));
    case UCS_ERR_NO_MEMORY:
    case UCS_ERR_NO_RESOURCE: return Status::IoError(std::move(message));
    default: return Status::Internal(std::move(message));
  }
}

}  // namespace sray::transport
