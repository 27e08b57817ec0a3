#include "common/status.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace sray {
namespace {

TEST(Status, DefaultIsOk) {
  EXPECT_TRUE(Status().ok());
  EXPECT_TRUE(Status::Ok().WithContext("ignored").ok());
}

TEST(Status, ContextIsPrefixedAndCodeKept) {
  const Status status = Status::NotFound("no such thing").WithContext("loading");
  EXPECT_EQ(status.code(), StatusCode::kNotFound);
  EXPECT_EQ(status.message(), "loading: no such thing");
}

TEST(Status, RemedyIsAppended) {
  const Status status = Status::IoError("cannot write x: disk full").WithRemedy("free space");
  EXPECT_EQ(status.code(), StatusCode::kIoError);
  EXPECT_EQ(status.message(), "cannot write x: disk full: free space");
  EXPECT_TRUE(Status::Ok().WithRemedy("ignored").ok());
}

TEST(Status, ErrnoMapsToCodesAndKeepsTheSystemMessage) {
  EXPECT_EQ(Status::FromErrno(ENOENT, "open x").code(), StatusCode::kNotFound);
  EXPECT_EQ(Status::FromErrno(EACCES, "open x").code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(Status::FromErrno(EEXIST, "mkdir x").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(Status::FromErrno(EIO, "read x").code(), StatusCode::kIoError);
  EXPECT_EQ(Status::FromErrno(ENOENT, "open x").message(), "open x: No such file or directory");
}

TEST(Result, HoldsAValueOrAnError) {
  Result<int> value = 3;
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, 3);
  EXPECT_TRUE(value.status().ok());
  Result<int> error = Status::Internal("boom");
  ASSERT_FALSE(error.ok());
  EXPECT_EQ(error.status().message(), "boom");
}

}  // namespace
}  // namespace sray
