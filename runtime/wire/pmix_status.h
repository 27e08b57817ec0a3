#pragma once

// The one place where PMIx status codes become sray Status values.

#include <pmix.h>

#include <string_view>

#include "common/status.h"

namespace sray::wire {

Status FromPmix(pmix_status_t status, std::string_view what);

}  // namespace sray::wire
