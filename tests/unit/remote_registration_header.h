#pragma once
// A header registering a function, for remote_registration_test.cc.
#include <sray/api.h>

namespace registration_test {
inline int from_header(int value) { return value + 1; }
}  // namespace registration_test
SRAY_REMOTE(registration_test::from_header);  // line 8, as in the test file
