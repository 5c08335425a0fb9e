#include "ferry/types/type_change.h"

#include <gtest/gtest.h>

#include "ferry/types/type_change_cases.h"

namespace ferry {
namespace {

TEST(TypeChangeTest, WidensIntFloatAndDecimalPrecisionAndRefusesTheRest) {
  for (const auto& c : testing::TypeChangeCases()) {
    EXPECT_EQ(CompareTypes(c.table, c.source), c.expected)
        << c.table.ToIceberg() << " <- " << c.source.ToIceberg();
  }
}

TEST(TypeChangeTest, TheEvolvedTypeIsTheSourcesWithListElementsRequiredOnlyWhenBothAre) {
  EXPECT_EQ(EvolvedType(DataType::Int32(), DataType::Int64()), DataType::Int64());
  EXPECT_EQ(EvolvedType(DataType::Int64(), DataType::Int32()), std::nullopt);
  auto t = EvolvedType(DataType::List(DataType::Int32(), true),
                       DataType::List(DataType::Int64(), false));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->list().type, DataType::Int64());
  EXPECT_FALSE(t->list().required);
  t = EvolvedType(DataType::List(DataType::Int32(), true), DataType::List(DataType::Int32(), true));
  ASSERT_TRUE(t);
  EXPECT_TRUE(t->list().required);
}

}  // namespace
}  // namespace ferry
