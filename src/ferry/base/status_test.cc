#include "ferry/base/status.h"

#include <gtest/gtest.h>

namespace ferry {
namespace {

Result<int> Half(int v) {
  if (v % 2 != 0) return Status::InvalidArgument(std::to_string(v) + " is odd");
  return v / 2;
}

Result<int> Quarter(int v) {
  FERRY_ASSIGN_OR_RETURN(int h, Half(v));
  FERRY_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(StatusTest, OkAndErrorCarryCodeAndMessage) {
  EXPECT_TRUE(Status::OK().ok());
  Status s = Status::NotFound("table shop.orders");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "not found: table shop.orders");
  EXPECT_EQ(s.WithContext("opening source").message(), "opening source: table shop.orders");
}

TEST(StatusTest, OnlyConflictsAndUnreachableServersAreRetryable) {
  EXPECT_TRUE(Status::CommitFailed("cas").retryable());
  EXPECT_TRUE(Status::Unavailable("down").retryable());
  // An unknown commit outcome must be resolved by reading the marker, never by a blind retry.
  EXPECT_FALSE(Status::CommitStateUnknown("lost connection").retryable());
  EXPECT_FALSE(Status::Corruption("bad").retryable());
}

TEST(StatusTest, AssignOrReturnPropagatesTheFirstError) {
  auto ok = Quarter(12);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 3);
  auto bad = Quarter(6);  // 6 -> 3 -> odd
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "3 is odd");
}

TEST(StatusTest, ResultFromOkStatusIsAnInternalError) {
  Result<int> r(Status::OK());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
}

}  // namespace
}  // namespace ferry
