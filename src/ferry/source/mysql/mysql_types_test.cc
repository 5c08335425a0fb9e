#include "ferry/source/mysql/mysql_types.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ferry/types/value_parse.h"

namespace ferry::source {
namespace {

MysqlColumn Col(std::string data_type, std::string column_type, int64_t precision = 0,
                int64_t scale = 0) {
  MysqlColumn c;
  c.name = "c";
  c.data_type = std::move(data_type);
  c.column_type = std::move(column_type);
  c.precision = precision;
  c.scale = scale;
  return c;
}

std::string TypeOf(const MysqlColumn& c) { return MapMysqlColumn(c).type.ToIceberg(); }

TEST(MysqlTypeMapTest, EveryIntegerWidthSignedAndUnsigned) {
  EXPECT_EQ(TypeOf(Col("tinyint", "tinyint(4)")), "int");
  EXPECT_EQ(TypeOf(Col("tinyint", "tinyint(3) unsigned")), "int");
  EXPECT_EQ(TypeOf(Col("smallint", "smallint(5) unsigned")), "int");
  EXPECT_EQ(TypeOf(Col("mediumint", "mediumint(8) unsigned")), "int");
  EXPECT_EQ(TypeOf(Col("int", "int(11)")), "int");
  EXPECT_EQ(TypeOf(Col("int", "int(10) unsigned")), "long");
  EXPECT_EQ(TypeOf(Col("bigint", "bigint(20)")), "long");
  EXPECT_EQ(TypeOf(Col("bigint", "bigint(20) unsigned")), "decimal(20,0)");
  EXPECT_EQ(TypeOf(Col("year", "year(4)")), "int");
}

TEST(MysqlTypeMapTest, NumbersBitsAndTemporalTypes) {
  EXPECT_EQ(TypeOf(Col("float", "float")), "float");
  EXPECT_EQ(TypeOf(Col("double", "double")), "double");
  EXPECT_EQ(TypeOf(Col("decimal", "decimal(10,2)", 10, 2)), "decimal(10,2)");
  EXPECT_EQ(TypeOf(Col("decimal", "decimal(38,38)", 38, 38)), "decimal(38,38)");
  // Beyond Iceberg's 38 digits: the exact text, as a string.
  EXPECT_EQ(TypeOf(Col("decimal", "decimal(65,30)", 65, 30)), "string");
  EXPECT_EQ(MapMysqlColumn(Col("decimal", "decimal(65,30)", 65, 30)).wire, MysqlWire::kDecimalText);
  EXPECT_EQ(TypeOf(Col("bit", "bit(1)", 1)), "boolean");
  EXPECT_EQ(TypeOf(Col("bit", "bit(63)", 63)), "long");
  EXPECT_EQ(TypeOf(Col("bit", "bit(64)", 64)), "decimal(20,0)");
  EXPECT_EQ(TypeOf(Col("date", "date")), "date");
  EXPECT_EQ(TypeOf(Col("datetime", "datetime(6)")), "timestamp");
  EXPECT_EQ(TypeOf(Col("timestamp", "timestamp(3)")), "timestamptz");
  EXPECT_EQ(TypeOf(Col("time", "time(6)")), "long");
}

TEST(MysqlTypeMapTest, TextBinaryAndOthers) {
  for (const char* t : {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum",
                        "set", "json", "inet6"}) {
    EXPECT_EQ(TypeOf(Col(t, t)), "string") << t;
  }
  for (const char* t : {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}) {
    EXPECT_EQ(TypeOf(Col(t, t)), "binary") << t;
  }
  EXPECT_EQ(TypeOf(Col("uuid", "uuid")), "uuid");
  MysqlMapping geo = MapMysqlColumn(Col("point", "point"));
  EXPECT_NE(geo.error.find("cannot map type point of column `c`"), std::string::npos);
  EXPECT_NE(geo.error.find("ST_AsText"), std::string::npos);
}

TEST(MysqlTypeMapTest, ZeroDatesMakeNotNullDateColumnsOptionalExceptKeys) {
  MysqlColumn d = Col("datetime", "datetime");
  d.nullable = false;
  EXPECT_TRUE(MapMysqlColumn(d).nullable);  // a zero date reads as NULL
  d.key_position = 1;
  EXPECT_FALSE(MapMysqlColumn(d).nullable);
  MysqlColumn i = Col("int", "int(11)");
  i.nullable = false;
  EXPECT_FALSE(MapMysqlColumn(i).nullable);
}

class MysqlValueTest : public ::testing::Test {
 protected:
  // The column that the server's text `text` of a column of `c` converts to.
  Result<Column> Convert(const MysqlColumn& c, std::optional<std::string_view> text) {
    MysqlMapping m = MapMysqlColumn(c);
    Column col(m.type);
    FERRY_RETURN_IF_ERROR(AppendMysqlValue(m.wire, text, &col));
    return col;
  }
};

TEST_F(MysqlValueTest, IntegersAtTheirExtremes) {
  auto v = Convert(Col("int", "int(11)"), "-2147483648");
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->ValueAt<int32_t>(0), std::numeric_limits<int32_t>::min());
  v = Convert(Col("int", "int(10) unsigned"), "4294967295");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->ValueAt<int64_t>(0), 4294967295);
  v = Convert(Col("bigint", "bigint(20)"), "-9223372036854775808");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->ValueAt<int64_t>(0), std::numeric_limits<int64_t>::min());
  v = Convert(Col("bigint", "bigint(20) unsigned"), "18446744073709551615");
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(FormatDecimal(v->ValueAt<int128_t>(0), 0), "18446744073709551615");
  v = Convert(Col("bit", "bit(64)", 64), "18446744073709551615");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(FormatDecimal(v->ValueAt<int128_t>(0), 0), "18446744073709551615");
  v = Convert(Col("bit", "bit(1)", 1), "1");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->ValueAt<uint8_t>(0), 1);
  EXPECT_FALSE(Convert(Col("int", "int(11)"), "2147483648").ok());
  EXPECT_FALSE(Convert(Col("int", "int(11)"), "12abc").ok());
  EXPECT_FALSE(Convert(Col("bit", "bit(1)", 1), "2").ok());
}

TEST_F(MysqlValueTest, FloatsAndDecimalsExactly) {
  // FLOAT is read as CAST(c AS DOUBLE): the float's exact value.
  auto v = Convert(Col("float", "float"), "3.4028234663852886e38");
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->ValueAt<float>(0), std::numeric_limits<float>::max());
  v = Convert(Col("float", "float"), "0.10000000149011612");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->ValueAt<float>(0), 0.1f);
  EXPECT_FALSE(Convert(Col("float", "float"), "0.1").ok());  // no float has this value
  v = Convert(Col("double", "double"), "-0");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(std::signbit(v->ValueAt<double>(0)));
  v = Convert(Col("double", "double"), "2.2250738585072014e-308");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->ValueAt<double>(0), std::numeric_limits<double>::min());
  v = Convert(Col("decimal", "decimal(10,2)", 10, 2), "-99999999.99");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(FormatDecimal(v->ValueAt<int128_t>(0), 2), "-99999999.99");
  const std::string wide = "-99999999999999999999999999999999999.999999999999999999999999999999";
  v = Convert(Col("decimal", "decimal(65,30)", 65, 30), wide);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->GetBytes(0), wide);
}

TEST_F(MysqlValueTest, ZeroDatesReadAsNull) {
  for (const char* text : {"0000-00-00", "2024-00-10", "2024-05-00"}) {
    auto v = Convert(Col("date", "date"), text);
    ASSERT_TRUE(v.ok()) << text;
    EXPECT_FALSE(v->IsValid(0)) << text;
  }
  auto v = Convert(Col("datetime", "datetime"), "0000-00-00 00:00:00");
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->IsValid(0));
  v = Convert(Col("timestamp", "timestamp"), "0000-00-00 00:00:00.000000");
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->IsValid(0));
  v = Convert(Col("date", "date"), "0000-01-01");  // year zero is a date
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(v->IsValid(0));
  EXPECT_EQ(v->ValueAt<int32_t>(0), DaysFromCivil(0, 1, 1));
}

TEST_F(MysqlValueTest, DatetimesTimestampsAndTimes) {
  auto v = Convert(Col("datetime", "datetime(6)"), "9999-12-31 23:59:59.999999");
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(FormatTimestamp(v->ValueAt<int64_t>(0)), "9999-12-31 23:59:59.999999");
  v = Convert(Col("timestamp", "timestamp(6)"), "1970-01-01 00:00:01.000001");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->ValueAt<int64_t>(0), 1000001);
  v = Convert(Col("time", "time(6)"), "-838:59:59.000000");
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->ValueAt<int64_t>(0), -((838LL * 3600 + 59 * 60 + 59) * 1000000));
  v = Convert(Col("time", "time"), "838:59:59");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->ValueAt<int64_t>(0), (838LL * 3600 + 59 * 60 + 59) * 1000000);
  v = Convert(Col("time", "time(1)"), "-00:00:00.5");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->ValueAt<int64_t>(0), -500000);
  EXPECT_FALSE(Convert(Col("time", "time"), "12:60:00").ok());
  EXPECT_FALSE(Convert(Col("time", "time"), "noon").ok());
  v = Convert(Col("year", "year(4)"), "0");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->ValueAt<int32_t>(0), 0);
}

TEST_F(MysqlValueTest, TextMustBeUtf8AndNullsStayNull) {
  auto v = Convert(Col("varchar", "varchar(10)"), "Größe 😀");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->GetBytes(0), "Größe 😀");
  auto bad = Convert(Col("varchar", "varchar(10)"), std::string_view("\xff\xfe", 2));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not valid UTF-8"), std::string::npos);
  v = Convert(Col("blob", "blob"), std::string_view("\xff\x00", 2));
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->GetBytes(0), std::string_view("\xff\x00", 2));
  v = Convert(Col("int", "int(11)"), std::nullopt);
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->IsValid(0));
  v = Convert(Col("uuid", "uuid"), "123e4567-e89b-12d3-a456-426614174000");
  ASSERT_TRUE(v.ok()) << v.status().message();
}

// The binary form holds an integer in the fewest bytes that keep its sign, and gives back every
// value at each width's ends; a form of the wrong size is damage, not a value.
TEST(MysqlBinaryFormTest, IntegersInTheFewestBytesAndBack) {
  EXPECT_EQ(MysqlBinaryInt64(0).size(), 1u);
  EXPECT_EQ(MysqlBinaryInt64(127).size(), 1u);
  EXPECT_EQ(MysqlBinaryInt64(-128).size(), 1u);
  EXPECT_EQ(MysqlBinaryInt64(128).size(), 2u);
  EXPECT_EQ(MysqlBinaryInt64(-129).size(), 2u);
  EXPECT_EQ(MysqlBinaryInt64(std::numeric_limits<int64_t>::min()).size(), 8u);
  EXPECT_EQ(MysqlBinaryInt64(1700000000000000).size(), 7u);  // microseconds of 2023: 7 bytes
  auto back64 = [](int64_t v) {
    Column c(DataType::Int64());
    EXPECT_TRUE(AppendMysqlBinary(MysqlWire::kInt64, MysqlBinaryInt64(v), &c).ok());
    return c.ValueAt<int64_t>(0);
  };
  for (int n = 1; n <= 8; ++n) {
    const int64_t hi =
        n == 8 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (8 * n - 1)) - 1;
    for (int64_t v : {hi, -hi - 1, hi - 1, -hi, n == 8 ? hi : hi + 1, n == 8 ? -hi : -hi - 2}) {
      EXPECT_EQ(back64(v), v) << n;
    }
  }
  auto back128 = [](int128_t v, int precision) {
    Column c(DataType::Decimal(precision, 0));
    Status s = AppendMysqlBinary(MysqlWire::kDecimal, MysqlBinaryDecimal(v, 0), &c);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return s.ok() ? c.ValueAt<int128_t>(0) : int128_t{-1};
  };
  const int128_t nines = Pow10(38) - 1;
  EXPECT_EQ(MysqlBinaryDecimal(nines, 0).size(), 17u);
  EXPECT_EQ(back128(nines, 38), nines);
  EXPECT_EQ(back128(-nines, 38), -nines);
  for (int digits = 1; digits <= 38; ++digits) {
    EXPECT_EQ(back128(Pow10(digits) - 1, 38), Pow10(digits) - 1) << digits;
    EXPECT_EQ(back128(-Pow10(digits) + 1, 38), -Pow10(digits) + 1) << digits;
  }
  // The column's scale decides, as for text: 1.5 at scale 1 into decimal(10,2) is 1.50.
  Column d(DataType::Decimal(10, 2));
  ASSERT_TRUE(AppendMysqlBinary(MysqlWire::kDecimal, MysqlBinaryDecimal(15, 1), &d).ok());
  EXPECT_EQ(d.ValueAt<int128_t>(0), int128_t{150});
  EXPECT_EQ(AppendMysqlBinary(MysqlWire::kDecimal, MysqlBinaryDecimal(12345, 3), &d).code(),
            StatusCode::kInvalidArgument);  // 12.345: a digit beyond the scale
  Column i(DataType::Int32());
  EXPECT_EQ(AppendMysqlBinary(MysqlWire::kInt32, "", &i).code(), StatusCode::kCorruption);
  EXPECT_EQ(AppendMysqlBinary(MysqlWire::kInt32, std::string(9, '\1'), &i).code(),
            StatusCode::kCorruption);
  EXPECT_EQ(AppendMysqlBinary(MysqlWire::kDecimal, "\x01", &d).code(), StatusCode::kCorruption);
  EXPECT_EQ(AppendMysqlBinary(MysqlWire::kText, "x", &i).code(), StatusCode::kInternal);
  EXPECT_EQ(i.size(), 0u);
}

TEST(MysqlLiteralTest, NumbersUnquotedBinaryAsHexTextQuoted) {
  auto quote = [](std::string_view s) { return "'" + std::string(s) + "'"; };
  EXPECT_EQ(*MysqlLiteral(MysqlWire::kDecimal, "-12.50", quote), "-12.50");
  EXPECT_EQ(*MysqlLiteral(MysqlWire::kInt64, "42", quote), "42");
  EXPECT_FALSE(MysqlLiteral(MysqlWire::kInt64, "1 OR 1=1", quote).ok());
  EXPECT_FALSE(MysqlLiteral(MysqlWire::kDecimal, "1.", quote).ok());
  EXPECT_EQ(*MysqlLiteral(MysqlWire::kBinary, "00FF", quote), "X'00FF'");
  EXPECT_FALSE(MysqlLiteral(MysqlWire::kBinary, "0G", quote).ok());
  EXPECT_EQ(*MysqlLiteral(MysqlWire::kDatetime, "2024-01-01 00:00:00", quote),
            "'2024-01-01 00:00:00'");
}

TEST(MysqlCursorTest, WhatMayBeACursor) {
  EXPECT_EQ(ClassifyMysqlCursor(Col("bigint", "bigint(20)"), MysqlWire::kInt64).kind,
            MysqlCursor::Kind::kInteger);
  EXPECT_TRUE(ClassifyMysqlCursor(Col("datetime", "datetime"), MysqlWire::kDatetime).candidate);
  EXPECT_EQ(ClassifyMysqlCursor(Col("decimal", "decimal(10,2)"), MysqlWire::kDecimal).kind,
            MysqlCursor::Kind::kNumber);
  EXPECT_EQ(ClassifyMysqlCursor(Col("enum", "enum('a')"), MysqlWire::kText).kind,
            MysqlCursor::Kind::kRefused);
  EXPECT_EQ(ClassifyMysqlCursor(Col("double", "double"), MysqlWire::kDouble).kind,
            MysqlCursor::Kind::kRefused);
  EXPECT_FALSE(MysqlRangeKey(Col("enum", "enum('a')"), MysqlWire::kText));
  EXPECT_TRUE(MysqlRangeKey(Col("varchar", "varchar(5)"), MysqlWire::kText));
}

}  // namespace
}  // namespace ferry::source
