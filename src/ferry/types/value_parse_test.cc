#include "ferry/types/value_parse.h"

#include <gtest/gtest.h>

namespace ferry {
namespace {

TEST(ValueParseTest, DatesIncludingOldAndLeapDays) {
  EXPECT_EQ(*ParseDate("1970-01-01"), 0);
  EXPECT_EQ(*ParseDate("2000-03-01"), 11017);
  EXPECT_EQ(*ParseDate("1900-01-01"), -25567);
  EXPECT_EQ(*ParseDate("0001-01-01"), -719162);
  EXPECT_EQ(FormatDate(*ParseDate("2024-02-29")), "2024-02-29");
  EXPECT_FALSE(ParseDate("2023-02-29").ok());
  EXPECT_FALSE(ParseDate("2023-13-01").ok());
  EXPECT_FALSE(ParseDate("yesterday").ok());
}

TEST(ValueParseTest, TimestampsAreExactAndZonesAreExplicit) {
  EXPECT_EQ(*ParseTimestamp("1970-01-01 00:00:01", false), 1000000);
  EXPECT_EQ(*ParseTimestamp("1970-01-01T00:00:00.5", false), 500000);
  EXPECT_EQ(*ParseTimestamp("1969-12-31 23:59:59.999999", false), -1);
  EXPECT_EQ(*ParseTimestamp("2024-06-01", false), *ParseDate("2024-06-01") * 86400000000LL);
  EXPECT_EQ(*ParseTimestamp("1970-01-01 02:00:00+02:00", true), 0);
  EXPECT_EQ(*ParseTimestamp("1970-01-01 00:00:00Z", true), 0);
  EXPECT_EQ(*ParseTimestamp("1970-01-01 00:00:00.1234560", false), 123456);
  auto nanos = ParseTimestamp("1970-01-01 00:00:00.1234567", false);
  ASSERT_FALSE(nanos.ok());
  EXPECT_NE(nanos.status().message().find("does not round"), std::string::npos);
  auto zoned = ParseTimestamp("1970-01-01 00:00:00+01:00", false);
  ASSERT_FALSE(zoned.ok());
  EXPECT_NE(zoned.status().message().find("TIMESTAMPTZ"), std::string::npos);
  EXPECT_EQ(FormatTimestamp(-1), "1969-12-31 23:59:59.999999");
}

TEST(ValueParseTest, DecimalsNeverRound) {
  EXPECT_TRUE(*ParseDecimal("12.34", 10, 2) == 1234);
  EXPECT_TRUE(*ParseDecimal("-0.5", 10, 2) == -50);
  EXPECT_TRUE(*ParseDecimal("7", 10, 2) == 700);
  EXPECT_TRUE(*ParseDecimal("1.2300", 10, 2) == 123);
  EXPECT_FALSE(ParseDecimal("1.234", 10, 2).ok());
  EXPECT_FALSE(ParseDecimal("123456789.1", 10, 2).ok());
  EXPECT_FALSE(ParseDecimal("1e5", 10, 2).ok());
  auto big = ParseDecimal("-99999999999999999999999999999999999999", 38, 0);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(FormatDecimal(*big, 0), "-99999999999999999999999999999999999999");
  EXPECT_EQ(FormatDecimal(5, 3), "0.005");
  EXPECT_EQ(FormatDecimal(-1234, 2), "-12.34");
  EXPECT_EQ(FormatDecimal(0, 0), "0");
  EXPECT_EQ(FormatDecimal(0, 2), "0.00");
  EXPECT_EQ(FormatDecimal(-5, 1), "-0.5");
  EXPECT_EQ(FormatDecimal(123, 3), "0.123");
  EXPECT_EQ(FormatDecimal(1234, 3), "1.234");
  EXPECT_EQ(FormatDecimal(1, 38), "0." + std::string(37, '0') + "1");
  const int128_t min = static_cast<int128_t>(static_cast<unsigned __int128>(1) << 127);
  EXPECT_EQ(FormatDecimal(min, 0), "-170141183460469231731687303715884105728");
  EXPECT_EQ(FormatDecimal(min, 39), "-0.170141183460469231731687303715884105728");
}

}  // namespace
}  // namespace ferry
