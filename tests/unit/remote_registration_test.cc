// SRAY_REMOTE in a header and in the including file on the same line.
#include "remote_registration_header.h"
#include <gtest/gtest.h>

namespace registration_test {
inline int from_source(int value) { return value + 2; }
}  // namespace registration_test
SRAY_REMOTE(registration_test::from_source);  // line 8, as in the header

namespace {

TEST(RemoteRegistrationTest, AHeaderAndItsIncluderMayRegisterOnTheSameLineNumber) {
  EXPECT_EQ(sray::internal::FunctionName(sray::internal::KeyOf(&registration_test::from_header)),
            "registration_test::from_header");
  EXPECT_EQ(sray::internal::FunctionName(sray::internal::KeyOf(&registration_test::from_source)),
            "registration_test::from_source");
}

}  // namespace
