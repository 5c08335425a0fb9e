#include "ferry/sink/postgres/pg_evolve.h"

#include <gtest/gtest.h>

#include "ferry/sink/postgres/copy_encoder.h"
#include "ferry/types/type_change_cases.h"

namespace ferry::sink::pg {
namespace {

TEST(PgEvolveTest, ColumnsFerryCreatedFollowTheOneRule) {
  for (const auto& c : testing::TypeChangeCases()) {
    EXPECT_EQ(CompareColumnType(PgTypeName(c.table), c.source), c.expected)
        << PgTypeName(c.table) << " <- " << c.source.ToIceberg();
  }
}

TEST(PgEvolveTest, TheNamesFerryCreatesReadBackAsTheirTypes) {
  for (const auto& c : testing::TypeChangeCases()) {
    auto t = FerryTypeOfPgName(PgTypeName(c.table));
    ASSERT_TRUE(t) << PgTypeName(c.table);
    EXPECT_TRUE(t->SameShape(c.table) || (t->is_list() && t->list().type == c.table.list().type))
        << PgTypeName(c.table);
  }
  EXPECT_FALSE(FerryTypeOfPgName("smallint"));
  EXPECT_FALSE(FerryTypeOfPgName("numeric"));
  EXPECT_FALSE(FerryTypeOfPgName("numeric(10,2"));
  EXPECT_FALSE(FerryTypeOfPgName("character varying(10)"));
}

TEST(PgEvolveTest, TypesFerryDoesNotCreateWidenOrHoldTheValuesAsTheyAre) {
  EXPECT_EQ(CompareColumnType("smallint", DataType::Int32()), TypeChange::kWiden);
  EXPECT_EQ(CompareColumnType("smallint", DataType::Int64()), TypeChange::kWiden);
  EXPECT_EQ(CompareColumnType("numeric", DataType::Decimal(12, 2)), TypeChange::kSame);
  EXPECT_EQ(CompareColumnType("character varying", DataType::String()), TypeChange::kSame);
  EXPECT_EQ(CompareColumnType("character varying(10)", DataType::String()), TypeChange::kRefused);
  EXPECT_EQ(CompareColumnType("smallint", DataType::Float64()), TypeChange::kRefused);
  EXPECT_EQ(CompareColumnType("jsonb", DataType::String()), TypeChange::kRefused);
}

}  // namespace
}  // namespace ferry::sink::pg
