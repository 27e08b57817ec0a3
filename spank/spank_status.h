#pragma once

// The one place where SPANK's error codes become sray Status values.

#include "spank_api.h"

#include <string_view>

#include "common/status.h"

namespace sray::spank {

Status FromSpank(spank_err_t error, std::string_view what);

}  // namespace sray::spank
