#include "ferry/source/sqlite/convert.h"

#include <gtest/gtest.h>

#include "ferry/types/value_parse.h"

namespace ferry::source::sqlite_src {
namespace {

TEST(SqliteTypeMapTest, FollowsAffinityAndKnownNames) {
  EXPECT_TRUE(MapDeclaredType("INTEGER") == DataType::Int64());
  EXPECT_TRUE(MapDeclaredType("bigint") == DataType::Int64());
  EXPECT_TRUE(MapDeclaredType("VARCHAR(20)") == DataType::String());
  EXPECT_TRUE(MapDeclaredType("") == DataType::String());
  EXPECT_TRUE(MapDeclaredType("BLOB") == DataType::Binary());
  EXPECT_TRUE(MapDeclaredType("DOUBLE PRECISION") == DataType::Float64());
  EXPECT_TRUE(MapDeclaredType("REAL") == DataType::Float64());
  EXPECT_TRUE(MapDeclaredType("DECIMAL(12,2)") == DataType::Decimal(12, 2));
  EXPECT_TRUE(MapDeclaredType("NUMERIC(5)") == DataType::Decimal(5, 0));
  EXPECT_TRUE(MapDeclaredType("NUMERIC") == DataType::Float64());
  EXPECT_TRUE(MapDeclaredType("DATE") == DataType::Date());
  EXPECT_TRUE(MapDeclaredType("DATETIME") == DataType::Timestamp());
  EXPECT_TRUE(MapDeclaredType("TIMESTAMPTZ") == DataType::TimestampTz());
  EXPECT_TRUE(MapDeclaredType("BOOLEAN") == DataType::Boolean());
  EXPECT_TRUE(MapDeclaredType("JSON") == DataType::String());
}

class ConvertTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db =
        ferry::sqlite::Database::Open(":memory:", ferry::sqlite::Database::Mode::kReadWriteCreate);
    ASSERT_TRUE(db.ok());
    db_ = std::move(*db);
  }
  // Converts the single value of `select_expr` to a column of `type`.
  Status Convert(const std::string& select_expr, DataType type, Column* col) {
    auto st = db_->Prepare("SELECT " + select_expr);
    if (!st.ok()) return st.status();
    auto row = st->Step();
    if (!row.ok()) return row.status();
    *col = Column(type);
    return AppendValue(*st, 0, col);
  }
  std::unique_ptr<ferry::sqlite::Database> db_;
};

TEST_F(ConvertTest, ExactConversionsSucceed) {
  Column c(DataType::Int64());
  ASSERT_TRUE(Convert("9223372036854775807", DataType::Int64(), &c).ok());
  EXPECT_EQ(c.values<int64_t>()[0], INT64_MAX);
  ASSERT_TRUE(Convert("3.0", DataType::Int64(), &c).ok());
  EXPECT_EQ(c.values<int64_t>()[0], 3);
  ASSERT_TRUE(Convert("0.1", DataType::String(), &c).ok());
  EXPECT_EQ(c.GetBytes(0), "0.1");
  ASSERT_TRUE(Convert("'2024-02-29 13:14:15.5'", DataType::Timestamp(), &c).ok());
  EXPECT_EQ(c.values<int64_t>()[0], *ParseTimestamp("2024-02-29 13:14:15.5", false));
  ASSERT_TRUE(Convert("12.34", DataType::Decimal(10, 2), &c).ok());
  EXPECT_TRUE(c.values<int128_t>()[0] == 1234);
  ASSERT_TRUE(Convert("'12.345'", DataType::Decimal(10, 3), &c).ok());
  EXPECT_TRUE(c.values<int128_t>()[0] == 12345);
  ASSERT_TRUE(Convert("NULL", DataType::Date(), &c).ok());
  EXPECT_FALSE(c.IsValid(0));
  ASSERT_TRUE(Convert("x'00ff'", DataType::Binary(), &c).ok());
  EXPECT_EQ(c.GetBytes(0), std::string("\x00\xff", 2));
}

TEST_F(ConvertTest, LossyConversionsAreRefusedWithTheFix) {
  Column c(DataType::Int64());
  Status s = Convert("'abc'", DataType::Int64(), &c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("holds text ('abc')"), std::string::npos) << s.message();
  s = Convert("9007199254740993", DataType::Float64(), &c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("declare the column INTEGER"), std::string::npos) << s.message();
  s = Convert("1700000000", DataType::Timestamp(), &c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("does not guess the unit"), std::string::npos) << s.message();
  s = Convert("x'01'", DataType::String(), &c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("declare the column BLOB"), std::string::npos) << s.message();
  s = Convert("12.345", DataType::Decimal(10, 2), &c);
  EXPECT_FALSE(s.ok()) << "12.345 must not be rounded into decimal(10,2)";
  s = Convert("2", DataType::Boolean(), &c);
  EXPECT_FALSE(s.ok());
}

}  // namespace
}  // namespace ferry::source::sqlite_src
