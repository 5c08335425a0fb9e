#include "ferry/types/batch.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

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

TEST(BatchTest, AppendRowOfCopiesValuesNullsAndListElements) {
  Batch b(MakeSchema());
  for (int i = 0; i < 3; ++i) {
    b.column(0).AppendInt64(i);
    if (i == 1) {
      b.column(1).AppendNull();
    } else {
      b.column(1).AppendBytes("row " + std::to_string(i));
    }
    b.column(2).AppendDecimal(i * 100);
  }
  Batch copy(MakeSchema());
  for (size_t c = 0; c < 3; ++c) {
    copy.column(c).AppendRowOf(b.column(c), 2);
    copy.column(c).AppendRowOf(b.column(c), 1);
  }
  ASSERT_EQ(copy.num_rows(), 2u);
  EXPECT_EQ(copy.column(0).ValueAt<int64_t>(0), 2);
  EXPECT_EQ(copy.column(1).GetBytes(0), "row 2");
  EXPECT_TRUE(copy.column(2).ValueAt<int128_t>(0) == 200);
  EXPECT_FALSE(copy.column(1).IsValid(1));
  EXPECT_EQ(copy.column(1).null_count(), 1u);

  Column list(DataType::List(DataType::String(), false, 2));
  list.list_child().AppendBytes("a");
  list.list_child().AppendNull();
  list.AppendListEnd();
  list.AppendNull();
  list.list_child().AppendBytes("b");
  list.AppendListEnd();
  Column out(list.type());
  out.AppendRowOf(list, 2);
  out.AppendRowOf(list, 1);
  out.AppendRowOf(list, 0);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out.ListRange(0), std::make_pair(size_t{0}, size_t{1}));
  EXPECT_EQ(out.list_child().GetBytes(0), "b");
  EXPECT_FALSE(out.IsValid(1));
  EXPECT_EQ(out.ListRange(2), std::make_pair(size_t{1}, size_t{3}));
  EXPECT_EQ(out.list_child().GetBytes(1), "a");
  EXPECT_FALSE(out.list_child().IsValid(2));
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

TEST(ColumnTest, ListsKeepNullEmptyAndNullElementsApartAndCopyDeeply) {
  const DataType t = DataType::List(DataType::String(), false, 7);
  EXPECT_EQ(t.ToIceberg(), "list<string>");
  EXPECT_TRUE(t == DataType::List(DataType::String(), false, 7));
  EXPECT_FALSE(t == t.WithElementId(8));
  EXPECT_TRUE(t.SameShape(t.WithElementId(8)));
  EXPECT_FALSE(t.SameShape(DataType::List(DataType::String(), true, 7)));
  Column c(t);
  c.AppendNull();
  c.AppendListEnd();
  c.list_child().AppendNull();
  c.list_child().AppendBytes("x");
  c.AppendListEnd();
  ASSERT_EQ(c.size(), 3u);
  EXPECT_FALSE(c.IsValid(0));
  EXPECT_TRUE(c.IsValid(1));
  EXPECT_EQ(c.ListRange(0), std::make_pair(size_t{0}, size_t{0}));
  EXPECT_EQ(c.ListRange(1), std::make_pair(size_t{0}, size_t{0}));
  EXPECT_EQ(c.ListRange(2), std::make_pair(size_t{0}, size_t{2}));
  EXPECT_FALSE(c.list_child().IsValid(0));
  // An element appended by a row that then failed is dropped.
  c.list_child().AppendBytes("partial");
  c.DropOpenListElements();
  EXPECT_EQ(c.list_child().size(), 2u);
  Column copy = c;
  copy.list_child().AppendBytes("only in the copy");
  copy.AppendListEnd();
  EXPECT_EQ(c.list_child().size(), 2u);
  EXPECT_EQ(copy.size(), 4u);
  copy.Truncate(2);
  EXPECT_EQ(copy.list_child().size(), 0u);
  EXPECT_EQ(copy.null_count(), 1u);
  c.Clear();
  EXPECT_EQ(c.size(), 0u);
  EXPECT_EQ(c.list_child().size(), 0u);
}

// A batch is handed on at batch_rows rows, or sooner when its rows are wide.
TEST(BatchTest, BatchIsFullAtItsRowsOrAtItsBytes) {
  auto schema = std::make_shared<Schema>();
  schema->fields = {{1, "v", DataType::String(), false, ""}};
  Batch narrow(schema);
  size_t rows = 0;
  while (!BatchFull(narrow, 1000)) {
    narrow.column(0).AppendBytes("short");
    ++rows;
  }
  EXPECT_EQ(rows, 1000u);
  Batch wide(schema);
  const std::string value(64 * 1024, 'x');
  rows = 0;
  while (!BatchFull(wide, 1000000)) {
    wide.column(0).AppendBytes(value);
    ++rows;
  }
  EXPECT_GE(wide.MemoryBytes(), kBatchBytesTarget);
  EXPECT_LE(rows, kBatchBytesTarget / value.size() + 16);
}

// The gather copies what AppendRowOf copies, row by row, for every kind of column.
TEST(BatchTest, AppendRowsOfMatchesAppendRowOf) {
  auto schema = std::make_shared<Schema>();
  schema->fields = {{1, "id", DataType::Int64(), true, ""},
                    {2, "name", DataType::String(), false, ""},
                    {3, "price", DataType::Decimal(12, 2), false, ""},
                    {4, "day", DataType::Date(), false, ""},
                    {5, "flag", DataType::Boolean(), false, ""},
                    {6, "tags", DataType::List(DataType::String(), false, 7), false, ""}};
  Batch b(schema);
  for (int i = 0; i < 50; ++i) {
    b.column(0).AppendInt64(i * 3);
    if (i % 4 == 1) {
      b.column(1).AppendNull();
      b.column(2).AppendNull();
      b.column(3).AppendNull();
      b.column(4).AppendNull();
      b.column(5).AppendNull();
      continue;
    }
    b.column(1).AppendBytes(
        std::string(static_cast<size_t>(i % 7), static_cast<char>('a' + i % 26)));
    b.column(2).AppendDecimal(-i * 1000);
    b.column(3).AppendInt32(19000 + i);
    b.column(4).AppendBool(i % 2 == 0);
    for (int k = 0; k < i % 3; ++k) b.column(5).list_child().AppendBytes("t" + std::to_string(k));
    b.column(5).AppendListEnd();
  }
  const std::vector<uint32_t> rows = {49, 0, 1, 1, 17, 33, 5, 48, 2};
  Batch one(schema), gathered(schema);
  for (size_t c = 0; c < schema->fields.size(); ++c) {
    for (uint32_t r : rows) one.column(c).AppendRowOf(b.column(c), r);
    gathered.column(c).AppendRowsOf(b.column(c), rows.data(), 4);  // in two calls
    gathered.column(c).AppendRowsOf(b.column(c), rows.data() + 4, rows.size() - 4);
  }
  for (size_t c = 0; c < schema->fields.size(); ++c) {
    const Column& want = one.column(c);
    const Column& got = gathered.column(c);
    ASSERT_EQ(got.size(), rows.size()) << c;
    EXPECT_EQ(got.null_count(), want.null_count()) << c;
    for (size_t i = 0; i < rows.size(); ++i) {
      ASSERT_EQ(got.IsValid(i), want.IsValid(i)) << c << " row " << i;
      const int w = want.type().FixedWidth();
      if (want.type().is_list()) {
        EXPECT_EQ(got.ListRange(i), want.ListRange(i)) << c << " row " << i;
      } else if (w > 0) {
        EXPECT_EQ(std::memcmp(got.fixed_data() + i * w, want.fixed_data() + i * w, w), 0)
            << c << " row " << i;
      } else {
        EXPECT_EQ(got.GetBytes(i), want.GetBytes(i)) << c << " row " << i;
      }
    }
  }
}

}  // namespace
}  // namespace ferry
