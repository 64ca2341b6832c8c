#include "core/status.h"

#include <gtest/gtest.h>

namespace tessel {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return BadDataError("odd: " + std::to_string(x));
  return x / 2;
}

Result<int> Quarter(int x) {
  TESSEL_ASSIGN_OR_RETURN(int h, Half(x));
  TESSEL_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

TEST(Status, OkByDefaultAndCodesAreExitCodes) {
  EXPECT_TRUE(Status().ok());
  EXPECT_EQ(UsageError("x").exit_code(), 2);
  EXPECT_EQ(BadDataError("x").exit_code(), 3);
  EXPECT_EQ(PluginError("x").exit_code(), 4);
  EXPECT_EQ(RankFailedError("x").exit_code(), 5);
  EXPECT_EQ(StorageError("x").exit_code(), 6);
}

TEST(Status, WithContextPrefixesMessage) {
  Status s = BadDataError("line 3 malformed").WithContext("a.nt");
  EXPECT_EQ(s.message(), "a.nt: line 3 malformed");
  EXPECT_EQ(s.code(), Code::kBadData);
  EXPECT_TRUE(Status().WithContext("x").ok());
}

TEST(Result, AssignOrReturnPropagatesFirstError) {
  EXPECT_EQ(*Quarter(8), 2);
  Result<int> r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "odd: 3");
}

TEST(Result, FromOkStatusIsAnInternalError) {
  Result<int> r{Status()};
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInternal);
}

}  // namespace
}  // namespace tessel
