// Compiled by tests/unit/compile_errors/check.sh: with PARAMETER a type that
// views memory, registering the function must fail to compile naming the fix;
// with std::string it must compile.
#include <sray/api.h>

#include <string>
#include <string_view>

int Length(PARAMETER text) {
  return static_cast<int>(text.size());
}
SRAY_REMOTE(Length);
