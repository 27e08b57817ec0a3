#pragma once

// The one place where UCX status codes become sray Status values.

#include <ucs/type/status.h>

#include <string_view>

#include "common/status.h"

namespace sray::transport {

Status FromUcs(ucs_status_t status, std::string_view what);

}  // namespace sray::transport
