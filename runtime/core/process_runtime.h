#pragma once

// The one Runtime of this process, behind sray::internal::CurrentRuntime().

#include "sray/internal/runtime.h"

namespace sray::core {

// Null ends it: references dropped afterwards are ignored.
void SetProcessRuntime(internal::Runtime* runtime);
internal::Runtime* ProcessRuntime();

}  // namespace sray::core
