#include <gtest/gtest.h>

#include <vector>

#include "sray/api.h"
#include "sray/internal/arguments.h"

namespace sray {
namespace {

// An empty ref is refused with a typed error before the runtime is asked, so
// these run without sray::Init (before the fix, Get dereferenced null).
TEST(EmptyObjectRef, GetThrowsATypedErrorInsteadOfCrashing) {
  const ObjectRef<int> empty;
  EXPECT_FALSE(empty.valid());
  try {
    (void)Get(empty);
    FAIL() << "Get of an empty ObjectRef returned";
  } catch (const EmptyObjectRefError& error) {
    EXPECT_NE(std::string(error.what()).find("this ObjectRef is empty"), std::string::npos)
        << error.what();
  }
}

TEST(EmptyObjectRef, GetOfAListAndWaitThrowTheSameError) {
  const std::vector<ObjectRef<int>> refs(2);
  EXPECT_THROW((void)Get(refs), EmptyObjectRefError);
  EXPECT_THROW((void)Wait(refs, 1), EmptyObjectRefError);
}

TEST(EmptyObjectRef, PassingItToATaskThrowsBeforeAnythingIsSubmitted) {
  const ObjectRef<int> empty;
  EXPECT_THROW((void)internal::PackArguments<int>(empty), EmptyObjectRefError);
}

}  // namespace
}  // namespace sray
