#include "ferry/types/batch.h"

#include <gtest/gtest.h>

namespace ferry {
namespace {

std::shared_ptr<const Schema> MakeSchema() {
  auto s = std::make_shared<Schema>();
  s->fields = {{1, "id", DataType::Int64(), true, ""},
               {2, "name", DataType::String(), false, ""},
               {3, "price", DataType::Decimal(12, 2), false, ""}};
  s->identifier_field_ids = {1};
  return s;
}

TEST(BatchTest, FixedAndVariableColumnsKeepRowsAligned) {
  Batch b(MakeSchema());
  b.column(0).AppendInt64(7);
  b.column(1).AppendBytes("héllo");
  b.column(2).AppendDecimal(-12345);
  b.column(0).AppendInt64(8);
  b.column(1).AppendNull();
  b.column(2).AppendNull();
  b.column(0).AppendInt64(9);
  b.column(1).AppendBytes("");
  b.column(2).AppendDecimal(1);
  ASSERT_EQ(b.num_rows(), 3u);
  EXPECT_EQ(b.column(0).values<int64_t>()[2], 9);
  EXPECT_EQ(b.column(1).GetBytes(0), "héllo");
  EXPECT_FALSE(b.column(1).IsValid(1));
  EXPECT_EQ(b.column(1).GetBytes(1), "");
  EXPECT_TRUE(b.column(1).IsValid(2));
  EXPECT_EQ(b.column(1).null_count(), 1u);
  EXPECT_TRUE(b.column(2).values<int128_t>()[0] == -12345);
  EXPECT_TRUE(b.column(2).values<int128_t>()[1] == 0);  // NULL slots are zeroed
}

TEST(BatchTest, ClearKeepsCapacityForReuse) {
  Batch b(MakeSchema());
  for (int i = 0; i < 1000; ++i) {
    b.column(0).AppendInt64(i);
    b.column(1).AppendBytes("xxxxxxxxxxxxxxxx");
    b.column(2).AppendNull();
  }
  size_t before = b.MemoryBytes();
  b.Clear();
  EXPECT_EQ(b.num_rows(), 0u);
  EXPECT_EQ(b.column(2).null_count(), 0u);
  EXPECT_EQ(b.MemoryBytes(), before);
}

TEST(DataTypeTest, IcebergSpellingRoundTrips) {
  for (DataType t : {DataType::Boolean(), DataType::Int32(), DataType::Int64(), DataType::Float32(),
                     DataType::Float64(), DataType::Decimal(38, 10), DataType::Date(),
                     DataType::Time(), DataType::Timestamp(), DataType::TimestampTz(),
                     DataType::String(), DataType::Binary(), DataType::Uuid()}) {
    auto back = DataType::FromIceberg(t.ToIceberg());
    ASSERT_TRUE(back.ok()) << t.ToIceberg();
    EXPECT_TRUE(*back == t) << t.ToIceberg();
  }
  EXPECT_FALSE(DataType::FromIceberg("decimal(39,2)").ok());
  EXPECT_FALSE(DataType::FromIceberg("variant").ok());
}

}  // namespace
}  // namespace ferry
