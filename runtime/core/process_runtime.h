#pragma once

// The one Runtime of this process, behind sray::internal::CurrentRuntime():
// the process's Owner (driver, worker, or local mode).

#include "sray/internal/runtime.h"

namespace sray::core {

class Owner;

// Null ends it: references dropped afterwards are ignored.
void SetProcessRuntime(Owner* owner);
Owner* ProcessRuntime();

// True once code in this process called internal::EndProcessWithActor().
bool ProcessEndsWithActor();

}  // namespace sray::core
