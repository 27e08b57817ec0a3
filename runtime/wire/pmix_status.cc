#include "wire/pmix_status.h"

#include <string>

namespace sray::wire {

Status FromPmix(pmix_status_t status, std::string_view what) {
  if (status == PMIX_SUCCESS || status == PMIX_OPERATION_SUCCEEDED) return Status::Ok();
  std::string message = std::string(what) + ": " + PMIx_Error_string(status);
  switch (status) {
    case PMIX_ERR_NOT_FOUND:
    case PMIX_ERR_PROC_ENTRY_NOT_FOUND: return Status::NotFound(std::move(message));
    case PMIX_ERR_BAD_PARAM:
    case PMIX_ERR_INVALID_NAMESPACE: return Status::InvalidArgument(std::move(message));
    case PMIX_ERR_NO_PERMISSIONS: return Status::PermissionDenied(std::move(message));
    case PMIX_ERR_TIMEOUT:
    case PMIX_ERR_UNREACH:
    case PMIX_ERR_LOST_CONNECTION:
    case PMIX_ERR_INIT: return Status::Unavailable(std::move(message));
    default: return Status::Internal(std::move(message));
  }
}

}  // namespace sray::wire
