#include "ferry/sink/mysql/mysql_sql.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <limits>

#include "ferry/types/type_change_cases.h"
#include "ferry/types/value_parse.h"

namespace ferry::sink::mysql {
namespace {

Flavor MariaDb() { return ParseServerInfo("10.11.19-MariaDB-0+deb12u1"); }

// A reference escaper for tests: the server runs without NO_BACKSLASH_ESCAPES.
void Escape(std::string_view in, std::string* out) {
  for (char c : in) {
    if (c == '\'' || c == '\\') out->push_back('\\');
    if (c == '\0') {
      out->append("\\0");
      continue;
    }
    out->push_back(c);
  }
}

Field MakeField(int32_t id, const std::string& name, DataType t, bool required = false) {
  Field f;
  f.id = id;
  f.name = name;
  f.type = std::move(t);
  f.required = required;
  return f;
}

std::shared_ptr<Schema> MakeSchema(std::vector<Field> fields, std::vector<int32_t> keys = {}) {
  auto s = std::make_shared<Schema>();
  s->fields = std::move(fields);
  s->identifier_field_ids = std::move(keys);
  return s;
}

TEST(MysqlSql, IdentifiersAreQuotedWithBackticksDoubled) {
  EXPECT_EQ(QuoteIdent("a"), "`a`");
  EXPECT_EQ(QuoteIdent("we`ird \"name\""), "`we``ird \"name\"`");
  EXPECT_EQ(Qualified("db", "t`"), "`db`.`t```");
}

TEST(MysqlSql, IdentifierLimitsNameTheFix) {
  EXPECT_TRUE(CheckIdentifier(std::string(64, 'a'), "table").ok());
  // 64 characters of two bytes each: characters count, not bytes.
  std::string umlauts;
  for (int i = 0; i < 64; ++i) umlauts += "ü";
  EXPECT_TRUE(CheckIdentifier(umlauts, "column").ok());
  Status s = CheckIdentifier(std::string(65, 'a'), "table");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("65 characters"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("at most 64"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("rename"), std::string::npos) << s.message();
  EXPECT_FALSE(CheckIdentifier("ends ", "column").ok());
  EXPECT_FALSE(CheckIdentifier("", "column").ok());
  EXPECT_FALSE(CheckIdentifier(std::string("a\0b", 3), "column").ok());
}

TEST(MysqlSql, ServerInfoPicksUuidTypeAndCollation) {
  Flavor m = MariaDb();
  EXPECT_TRUE(m.mariadb);
  EXPECT_EQ(m.version, 101119);
  EXPECT_EQ(m.binary_collation(), "utf8mb4_nopad_bin");
  Flavor old = ParseServerInfo("5.5.5-10.6.12-MariaDB");
  EXPECT_EQ(old.version, 100612);
  Flavor my = ParseServerInfo("8.0.36");
  EXPECT_FALSE(my.mariadb);
  EXPECT_EQ(my.binary_collation(), "utf8mb4_0900_bin");
  EXPECT_EQ(ParseServerInfo("5.7.44-log").binary_collation(), "utf8mb4_bin");
}

TEST(MysqlSql, TypeMapping) {
  auto s = MakeSchema(
      {MakeField(1, "b", DataType::Boolean()), MakeField(2, "i", DataType::Int32()),
       MakeField(3, "l", DataType::Int64()), MakeField(4, "f", DataType::Float32()),
       MakeField(5, "d", DataType::Float64()), MakeField(6, "n", DataType::Decimal(12, 2)),
       MakeField(7, "day", DataType::Date()), MakeField(8, "t", DataType::Time()),
       MakeField(9, "ts", DataType::Timestamp()), MakeField(10, "tz", DataType::TimestampTz()),
       MakeField(11, "s", DataType::String()), MakeField(12, "bin", DataType::Binary()),
       MakeField(13, "u", DataType::Uuid()),
       MakeField(14, "xs", DataType::List(DataType::Int64(), false, 15))});
  auto specs = ColumnSpecs(*s, MariaDb());
  ASSERT_TRUE(specs.ok()) << specs.status().message();
  std::vector<std::string> types;
  for (const auto& sp : *specs) types.push_back(sp.type);
  EXPECT_EQ(types, (std::vector<std::string>{
                       "BOOLEAN", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL(12,2)", "DATE",
                       "TIME(6)", "DATETIME(6)", "DATETIME(6)",
                       "LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin", "LONGBLOB",
                       "CHAR(36) CHARACTER SET ascii COLLATE ascii_bin", "JSON"}));
  EXPECT_EQ((*specs)[9].comment, "ferry:timestamptz");
  EXPECT_EQ((*specs)[13].comment, "ferry:list<long>");
  EXPECT_EQ((*specs)[8].comment, "");
  EXPECT_EQ(ColumnDefinition(s->fields[9], (*specs)[9], true),
            "`tz` DATETIME(6) NOT NULL COMMENT 'ferry:timestamptz'");
  EXPECT_EQ((*specs)[12].comment, "ferry:uuid");
  auto my = ColumnSpecs(*s, ParseServerInfo("8.0.36"));
  ASSERT_TRUE(my.ok());
  EXPECT_EQ((*my)[10].type, "LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_0900_bin");
}

TEST(MysqlSql, KeyColumnsShareInnoDbsKeyBytes) {
  auto one = MakeSchema({MakeField(1, "k", DataType::String(), true)}, {1});
  auto specs = ColumnSpecs(*one, MariaDb());
  ASSERT_TRUE(specs.ok());
  EXPECT_EQ((*specs)[0].type, "VARCHAR(768) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin");
  EXPECT_EQ((*specs)[0].max_key_chars, 768);

  auto two = MakeSchema(
      {MakeField(1, "a", DataType::String(), true), MakeField(2, "b", DataType::Binary(), true),
       MakeField(3, "n", DataType::Int64(), true)},
      {1, 2, 3});
  specs = ColumnSpecs(*two, MariaDb());
  ASSERT_TRUE(specs.ok());
  // (3072 - 8) / 2 = 1532 bytes each: 383 characters, 1532 bytes.
  EXPECT_EQ((*specs)[0].max_key_chars, 383);
  EXPECT_EQ((*specs)[1].type, "VARBINARY(1532)");
  EXPECT_EQ((*specs)[1].max_key_bytes, 1532);
  EXPECT_EQ((*specs)[2].type, "BIGINT");

  auto list_key =
      MakeSchema({MakeField(1, "xs", DataType::List(DataType::Int32(), false, 2))}, {1});
  auto bad = ColumnSpecs(*list_key, MariaDb());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("xs"), std::string::npos);
}

class EncoderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    schema_ = MakeSchema(
        {MakeField(1, "id", DataType::Int32(), true), MakeField(2, "ratio", DataType::Float64()),
         MakeField(3, "r4", DataType::Float32()), MakeField(4, "amount", DataType::Decimal(12, 2)),
         MakeField(5, "day", DataType::Date()), MakeField(6, "at", DataType::TimestampTz()),
         MakeField(7, "tm", DataType::Time()), MakeField(8, "name", DataType::String()),
         MakeField(9, "raw", DataType::Binary()), MakeField(10, "ref", DataType::Uuid()),
         MakeField(11, "flag", DataType::Boolean()),
         MakeField(12, "xs", DataType::List(DataType::Float64(), false, 13))},
        {1});
    auto specs = ColumnSpecs(*schema_, MariaDb());
    ASSERT_TRUE(specs.ok());
    encoder_ = std::make_unique<RowEncoder>(schema_, *specs, Escape, "shop.items");
    for (size_t i = 0; i < schema_->fields.size(); ++i) all_.push_back(i);
  }

  // One row; `ratio` and `day` as given, everything else fixed.
  Batch Row(double ratio, int32_t day) {
    Batch b(schema_);
    b.column(0).AppendInt32(7);
    b.column(1).AppendDouble(ratio);
    b.column(2).AppendFloat(1.1f);
    b.column(3).AppendDecimal(-12345);
    b.column(4).AppendInt32(day);
    b.column(5).AppendInt64(1);
    b.column(6).AppendInt64(45296000001);
    b.column(7).AppendBytes(std::string("it's a \\ \0 x", 12));
    b.column(8).AppendBytes(std::string("\x00\xff", 2));
    uint8_t u[16];
    for (int i = 0; i < 16; ++i) u[i] = static_cast<uint8_t>(i * 17);
    b.column(9).AppendUuid(u);
    b.column(10).AppendNull();
    b.column(11).list_child().AppendDouble(0.5);
    b.column(11).list_child().AppendNull();
    b.column(11).list_child().AppendDouble(std::numeric_limits<double>::quiet_NaN());
    b.column(11).AppendListEnd();
    return b;
  }

  std::shared_ptr<Schema> schema_;
  std::unique_ptr<RowEncoder> encoder_;
  std::vector<size_t> all_;
};

TEST_F(EncoderTest, EveryTypeHasAnExactLiteral) {
  Batch b = Row(0.1, 19723);  // 2024-01-01
  std::string out;
  ASSERT_TRUE(encoder_->AppendRow(b, 0, all_, &out).ok());
  EXPECT_EQ(out,
            "(7,0.10000000000000001,1.1000000238418579,-123.45,'2024-01-01',"
            "'1970-01-01 00:00:00.000001','12:34:56.000001','it\\'s a \\\\ \\0 x',X'00FF',"
            "'00112233-4455-6677-8899-aabbccddeeff',NULL,'[0.5,null,\"NaN\"]')");
  // Deletes carry the key columns only.
  out.clear();
  ASSERT_TRUE(encoder_->AppendRow(b, 0, {0}, &out).ok());
  EXPECT_EQ(out, "(7)");
}

TEST_F(EncoderTest, NanIsRefusedNamingColumnRowAndFix) {
  for (double bad :
       {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    Batch b = Row(bad, 19723);
    std::string out;
    Status s = encoder_->AppendRow(b, 0, all_, &out);
    ASSERT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("`ratio`"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("shop.items"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("id = 7"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("replace the value at the source"), std::string::npos)
        << s.message();
  }
}

TEST_F(EncoderTest, DatesOutsideTheDocumentedYearsAreRefused) {
  const int32_t year500 = static_cast<int32_t>(DaysFromCivil(500, 1, 1));
  Batch b = Row(1, year500);
  std::string out;
  Status s = encoder_->AppendRow(b, 0, all_, &out);
  ASSERT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("0500-01-01"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("`day`"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("1000 to 9999"), std::string::npos) << s.message();
  EXPECT_TRUE(
      encoder_->AppendRow(Row(1, static_cast<int32_t>(DaysFromCivil(1000, 1, 1))), 0, all_, &out)
          .ok());
  EXPECT_TRUE(
      encoder_->AppendRow(Row(1, static_cast<int32_t>(DaysFromCivil(9999, 12, 31))), 0, all_, &out)
          .ok());
  EXPECT_FALSE(
      encoder_->AppendRow(Row(1, static_cast<int32_t>(DaysFromCivil(10000, 1, 1))), 0, all_, &out)
          .ok());
}

TEST(MysqlSql, TextKeysLongerThanTheColumnAreRefused) {
  auto s = MakeSchema({MakeField(1, "k", DataType::String(), true)}, {1});
  auto specs = ColumnSpecs(*s, MariaDb());
  ASSERT_TRUE(specs.ok());
  RowEncoder enc(s, *specs, Escape, "db.t");
  Batch b(s);
  std::string ok;
  for (int i = 0; i < 768; ++i) ok += "€";  // 3 bytes each: characters count
  b.column(0).AppendBytes(ok);
  b.column(0).AppendBytes(std::string(769, 'x'));
  std::string out;
  EXPECT_TRUE(enc.AppendRow(b, 0, {0}, &out).ok());
  Status st = enc.AppendRow(b, 1, {0}, &out);
  ASSERT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("769 characters"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("VARCHAR(768)"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("primary_key"), std::string::npos) << st.message();
}

TEST(MysqlSql, ServerTextReadsBackEveryType) {
  auto check = [](DataType t, std::string_view text) {
    Column c(t);
    Status s = AppendServerText(text, &c);
    EXPECT_TRUE(s.ok()) << t.ToIceberg() << " '" << text << "': " << s.message();
    return c;
  };
  EXPECT_EQ(check(DataType::Boolean(), "1").values<uint8_t>()[0], 1);
  EXPECT_EQ(check(DataType::Int32(), "-2147483648").values<int32_t>()[0],
            std::numeric_limits<int32_t>::min());
  EXPECT_EQ(check(DataType::Int64(), "9223372036854775807").values<int64_t>()[0],
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(check(DataType::Float64(), "0.1").values<double>()[0], 0.1);
  EXPECT_EQ(check(DataType::Float32(), "1.100000023841858").values<float>()[0], 1.1f);
  EXPECT_EQ(check(DataType::Decimal(12, 2), "-123.45").values<int128_t>()[0], -12345);
  EXPECT_EQ(check(DataType::Date(), "2024-01-01").values<int32_t>()[0], 19723);
  EXPECT_EQ(check(DataType::Time(), "12:34:56.000001").values<int64_t>()[0], 45296000001);
  EXPECT_EQ(check(DataType::TimestampTz(), "1970-01-01 00:00:00.000001").values<int64_t>()[0], 1);
  EXPECT_EQ(check(DataType::Timestamp(), "1970-01-02 00:00:00").values<int64_t>()[0], 86400000000);
  EXPECT_EQ(check(DataType::Binary(), std::string_view("\0\xff", 2)).GetBytes(0),
            std::string_view("\0\xff", 2));
  Column u = check(DataType::Uuid(), "00112233-4455-6677-8899-aabbccddeeff");
  EXPECT_EQ(u.fixed_data()[15], 0xff);
  Column l = check(DataType::List(DataType::Float64(), false, 2), "[0.5, null, \"NaN\"]");
  ASSERT_EQ(l.list_child().size(), 3u);
  EXPECT_FALSE(l.list_child().IsValid(1));
  EXPECT_TRUE(std::isnan(l.list_child().values<double>()[2]));

  Column bad(DataType::Int32());
  EXPECT_FALSE(AppendServerText("3000000000", &bad).ok());
  EXPECT_FALSE(AppendServerText("0000-00-00", &*std::make_unique<Column>(DataType::Date())).ok());
}

TEST(MysqlSql, ListsRoundTripThroughJson) {
  for (DataType element : {DataType::Binary(), DataType::Date(), DataType::TimestampTz(),
                           DataType::Decimal(10, 3), DataType::Uuid(), DataType::Boolean()}) {
    Column c(DataType::List(element, false, 2));
    Column& e = c.list_child();
    switch (element.kind()) {
      case TypeKind::kBinary:
        e.AppendBytes(std::string("\x01\x02\xfe", 3));
        e.AppendBytes("");
        break;
      case TypeKind::kDate:
        e.AppendInt32(-719528);  // year 0: lists are JSON text, any year fits
        break;
      case TypeKind::kTimestampTz:
        e.AppendInt64(-1);
        break;
      case TypeKind::kDecimal:
        e.AppendDecimal(-1005);
        break;
      case TypeKind::kUuid: {
        uint8_t u[16] = {1};
        e.AppendUuid(u);
        break;
      }
      default:
        e.AppendBool(true);
    }
    e.AppendNull();
    c.AppendListEnd();
    auto json = ListJson(c, 0);
    ASSERT_TRUE(json.ok());
    Column back(c.type());
    ASSERT_TRUE(AppendListJson(*json, &back).ok()) << *json;
    auto json2 = ListJson(back, 0);
    ASSERT_TRUE(json2.ok());
    EXPECT_EQ(*json, *json2);
    EXPECT_EQ(back.list_child().size(), e.size());
  }
}

TEST(MysqlSql, ServerColumnsMapBackToFerryTypes) {
  auto type_of = [](std::string data_type, std::string column_type, std::string comment = "",
                    int64_t p = 0, int64_t s = 0) {
    ServerColumn c;
    c.name = "c";
    c.data_type = data_type;
    c.column_type = column_type;
    c.comment = comment;
    c.precision = p;
    c.scale = s;
    auto t = TypeOfServerColumn(c);
    return t.ok() ? t->ToIceberg() : "error: " + t.status().message();
  };
  EXPECT_EQ(type_of("tinyint", "tinyint(1)"), "boolean");
  EXPECT_EQ(type_of("tinyint", "tinyint(4)"), "int");
  EXPECT_EQ(type_of("int", "int(11)"), "int");
  EXPECT_EQ(type_of("int", "int(10) unsigned"), "long");
  EXPECT_EQ(type_of("bigint", "bigint(20) unsigned"), "decimal(20,0)");
  EXPECT_EQ(type_of("decimal", "decimal(12,2)", "", 12, 2), "decimal(12,2)");
  EXPECT_EQ(type_of("datetime", "datetime(6)"), "timestamp");
  EXPECT_EQ(type_of("datetime", "datetime(6)", "ferry:timestamptz"), "timestamptz");
  EXPECT_EQ(type_of("timestamp", "timestamp(6)"), "timestamptz");
  // A comment that no longer fits the column's type is ignored.
  EXPECT_EQ(type_of("bigint", "bigint(20)", "ferry:timestamptz"), "long");
  EXPECT_EQ(type_of("longtext", "longtext", "ferry:list<long>"), "list<long>");
  EXPECT_EQ(type_of("longtext", "longtext"), "string");
  EXPECT_EQ(type_of("uuid", "uuid"), "uuid");
  EXPECT_EQ(type_of("char", "char(36)", "ferry:uuid"), "uuid");
  EXPECT_EQ(type_of("varbinary", "varbinary(3072)"), "binary");
  EXPECT_NE(type_of("geometry", "geometry").find("error"), std::string::npos);

  ServerColumn f;
  f.name = "r`4";
  EXPECT_EQ(ReadExpression(f, DataType::Float32()), "(`r``4` + 0e0)");
  EXPECT_EQ(ReadExpression(f, DataType::Date()), "`r``4`");
}

// The column ferry declares for `t`, as MariaDB's information_schema.COLUMNS then describes it.
ServerColumn DescribedColumn(const DataType& t) {
  auto specs = ColumnSpecs(*MakeSchema({MakeField(1, "c", t)}), MariaDb());
  EXPECT_TRUE(specs.ok());
  const ColumnSpec& spec = (*specs)[0];
  std::string declared = spec.type.substr(0, spec.type.find(' '));
  for (char& ch : declared) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  ServerColumn c;
  c.name = "c";
  c.data_type = declared.substr(0, declared.find('('));
  c.column_type = declared;
  c.comment = spec.comment;
  if (c.data_type == "boolean") {
    c.data_type = "tinyint";
    c.column_type = "tinyint(1)";
  }
  if (c.data_type == "json") c.data_type = c.column_type = "longtext";  // MariaDB's JSON
  c.precision = t.precision();
  c.scale = t.scale();
  return c;
}

TEST(MysqlSql, ColumnsFollowTheOneSchemaEvolutionRule) {
  for (const auto& c : testing::TypeChangeCases()) {
    const ServerColumn have = DescribedColumn(c.table);
    EXPECT_EQ(CompareColumnType(have, c.source), c.expected)
        << have.column_type << " <- " << c.source.ToIceberg();
  }
  ServerColumn geometry;
  geometry.data_type = geometry.column_type = "geometry";
  EXPECT_EQ(CompareColumnType(geometry, DataType::String()), TypeChange::kRefused);
}

TEST(MysqlSql, UrlsParse) {
  auto u = ParseUrl("mysql://fe%40rry:p%3Ass@db.example.com:3307/shop");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->user, "fe@rry");
  EXPECT_EQ(u->password, "p:ss");
  EXPECT_EQ(u->host, "db.example.com");
  EXPECT_EQ(u->port, 3307);
  EXPECT_EQ(u->database, "shop");
  u = ParseUrl("mariadb://root@[::1]/d");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 3306);
  EXPECT_EQ(u->password, "");
  for (const char* bad : {"postgres://u@h/d", "mysql://u@h:99999/d", "mysql://u@h/d?ssl=1",
                          "mysql:///d", "mysql://u:%zz@h/d"}) {
    auto r = ParseUrl(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("mysql://user:password@host:port/database"),
                std::string::npos);
    }
  }
}

}  // namespace
}  // namespace ferry::sink::mysql
