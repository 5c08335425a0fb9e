#include "ferry/types/value_text.h"

#include <gtest/gtest.h>

#include "ferry/types/value_parse.h"

namespace ferry {
namespace {

TEST(ValueTextTest, DatesOutsideFourDigitYearsUseTheSignedForm) {
  EXPECT_EQ(FormatDateIso(0), "1970-01-01");
  EXPECT_EQ(FormatDateIso(*ParseDate("2024-02-29")), "2024-02-29");
  EXPECT_EQ(FormatTimeIso(0), "00:00:00.000000");
  EXPECT_EQ(FormatTimeIso(86399999999), "23:59:59.999999");
  EXPECT_EQ(FormatTimeIso(838LL * 3600000000LL + 59 * 60000000LL + 59000000LL), "838:59:59.000000");
  EXPECT_EQ(FormatTimestampIso(1717249500123456), "2024-06-01 13:45:00.123456");
  EXPECT_EQ(FormatDateIso(*ParseDate("0000-01-01")), "0000-01-01");
  EXPECT_EQ(FormatDateIso(*ParseDate("0000-01-01") - 1), "-0001-12-31");
  EXPECT_EQ(FormatDateIso(*ParseDate("9999-12-31") + 1), "+10000-01-01");
  for (int32_t d : {INT32_MIN, INT32_MIN + 1, -719529, -1, 0, 1, 2932897, INT32_MAX}) {
    auto back = ParseDateIso(FormatDateIso(d));
    ASSERT_TRUE(back.ok()) << FormatDateIso(d) << ": " << back.status().ToString();
    EXPECT_EQ(*back, d) << FormatDateIso(d);
  }
  EXPECT_FALSE(ParseDateIso("10000-01-01").ok());  // more than 4 digits need a sign
  EXPECT_FALSE(ParseDateIso("+0001-02-29").ok());
  EXPECT_FALSE(ParseDateIso("2024-01-01x").ok());
}

TEST(ValueTextTest, TimestampsRoundTripAtTheExtremes) {
  for (int64_t us : {INT64_MIN, INT64_MIN + 1, int64_t{-62167219200000001}, int64_t{-1}, int64_t{0},
                     int64_t{253402300800000000}, INT64_MAX}) {
    auto back = ParseTimestampIso(FormatTimestampIso(us), false);
    ASSERT_TRUE(back.ok()) << FormatTimestampIso(us) << ": " << back.status().ToString();
    EXPECT_EQ(*back, us) << FormatTimestampIso(us);
    auto tz = ParseTimestampIso(FormatTimestampIso(us) + "+00:00", true);
    ASSERT_TRUE(tz.ok()) << tz.status().ToString();
    EXPECT_EQ(*tz, us);
  }
  EXPECT_EQ(FormatTimestampIso(-1), "1969-12-31 23:59:59.999999");
  EXPECT_EQ(*ParseTimestampIso("-0001-01-01 01:00:00+01:00", true),
            *ParseTimestampIso("-0001-01-01 00:00:00", false));
  EXPECT_FALSE(ParseTimestampIso("-0001-01-01 00:00:00+01:00", false).ok());
  EXPECT_FALSE(ParseTimestampIso("+10000-01-01 25:00", false).ok());
}

TEST(ValueTextTest, TimesAndUuids) {
  EXPECT_EQ(FormatTimeIso(0), "00:00:00.000000");
  EXPECT_EQ(FormatTimeIso(86399999999), "23:59:59.999999");
  EXPECT_EQ(*ParseTime(FormatTimeIso(45296000007)), 45296000007);
  uint8_t u[16], back[16];
  for (int i = 0; i < 16; ++i) u[i] = static_cast<uint8_t>(i * 17 + 1);
  std::string text = FormatUuid(u);
  EXPECT_EQ(text, "01122334-4556-6778-899a-abbccddeef00");
  ASSERT_TRUE(ParseUuid("01122334-4556-6778-899A-ABBCCDDEEF00", back).ok());
  EXPECT_EQ(std::memcmp(u, back, 16), 0);
  EXPECT_FALSE(ParseUuid("01122334-4556-6778-899a-abbccddeeff", back).ok());
  EXPECT_FALSE(ParseUuid("0112233404556-6778-899a-abbccddeeff0", back).ok());
}

TEST(Base64Test, RoundTripsEveryLengthAndRefusesOtherText) {
  EXPECT_EQ(FormatBase64("foobar"), "Zm9vYmFy");
  EXPECT_EQ(FormatBase64("fo"), "Zm8=");
  EXPECT_EQ(FormatBase64(std::string("\0\xff", 2)), "AP8=");
  std::string bytes;
  for (int n = 0; n < 8; ++n) {
    EXPECT_EQ(ParseBase64(FormatBase64(bytes)), bytes) << n;
    bytes += static_cast<char>(n * 37 + 200);
  }
  EXPECT_FALSE(ParseBase64("Zm9"));
  EXPECT_FALSE(ParseBase64("Zm=v"));
  EXPECT_FALSE(ParseBase64("Zm9v!mFy"));
}

TEST(TextValueTest, EveryTextStoredTypeReadsBackExactlyAndOthersAreRefused) {
  struct Case {
    DataType type;
    std::string text;
  };
  for (const Case& c :
       {Case{DataType::Decimal(38, 4), "-1234567890123456789012345678.0001"},
        Case{DataType::Date(), "-0044-03-15"}, Case{DataType::Time(), "23:59:59.999999"},
        Case{DataType::Timestamp(), "+10000-01-01 00:00:00.000000"},
        Case{DataType::TimestampTz(), "1900-01-01 00:00:00.000001+00:00"},
        Case{DataType::Uuid(), "123e4567-e89b-12d3-a456-426614174000"}}) {
    Column col(c.type);
    ASSERT_TRUE(AppendTextValue(c.text, &col).ok()) << c.text;
    EXPECT_EQ(FormatTextValue(col, 0).value_or("(none)"), c.text);
  }
  Column ints(DataType::Int64());
  EXPECT_FALSE(AppendTextValue("1", &ints).ok());
  ints.AppendInt64(1);
  EXPECT_FALSE(FormatTextValue(ints, 0).has_value());
  Column dates(DataType::Date());
  EXPECT_FALSE(AppendTextValue("2024-02-30", &dates).ok());
}

}  // namespace
}  // namespace ferry
