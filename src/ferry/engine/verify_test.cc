#include "ferry/engine/verify.h"

#include <gtest/gtest.h>

#include <map>

namespace ferry::engine {
namespace {

TEST(DisplayValueTest, ShowsValuesAsText) {
  Column list(DataType::List(DataType::String(), false, 2));
  list.list_child().AppendBytes("a");
  list.list_child().AppendNull();
  list.AppendListEnd();
  EXPECT_EQ(DisplayValue(list, 0), "['a', NULL]");
  Column s(DataType::String());
  s.AppendBytes("it's");
  s.AppendNull();
  EXPECT_EQ(DisplayValue(s, 0), "'it''s'");
  EXPECT_EQ(DisplayValue(s, 1), "NULL");
  Column d(DataType::Decimal(10, 2));
  d.AppendDecimal(-1250);
  EXPECT_EQ(DisplayValue(d, 0), "-12.50");
  Column b(DataType::Binary());
  b.AppendBytes(std::string("\x00\xff", 2));
  EXPECT_EQ(DisplayValue(b, 0), "x'00ff'");
}

// ---- comparing fingerprints ----

std::shared_ptr<const Schema> TwoColumns(DataType value_type) {
  auto s = std::make_shared<Schema>();
  s->fields = {{1, "id", DataType::Int64(), true, ""}, {2, "v", value_type, false, ""}};
  return s;
}

std::vector<Fingerprint> Prints(const Batch& b, bool keyed) {
  RowFingerprinter fp({0, 1}, keyed ? std::vector<size_t>{0} : std::vector<size_t>{});
  std::vector<Fingerprint> out;
  for (size_t r = 0; r < b.num_rows(); ++r) out.push_back(fp.Of(b, r));
  return out;
}

TEST(CompareTest, SidesOfDifferentPhysicalTypesMatch) {
  // Source: int id, float v; destination: the widened table (long, double).
  auto ss = std::make_shared<Schema>();
  ss->fields = {{1, "id", DataType::Int32(), true, ""}, {2, "v", DataType::Float32(), false, ""}};
  Batch src(ss);
  Batch dst(TwoColumns(DataType::Float64()));
  for (int i = 0; i < 100; ++i) {
    src.column(0).AppendInt32(i);
    src.column(1).AppendFloat(static_cast<float>(i) / 8);
  }
  for (int i = 99; i >= 0; --i) {  // another order
    dst.column(0).AppendInt64(i);
    dst.column(1).AppendDouble(static_cast<double>(i) / 8);
  }
  auto a = Prints(src, true), b = Prints(dst, true);
  FingerprintDiff d = CompareFingerprints(&a, &b, 10);
  EXPECT_TRUE(d.empty());
}

TEST(CompareTest, NamesMissingExtraAndDifferentKeys) {
  Batch src(TwoColumns(DataType::String())), dst(TwoColumns(DataType::String()));
  for (int64_t i = 1; i <= 50; ++i) {
    src.column(0).AppendInt64(i);
    src.column(1).AppendBytes("v" + std::to_string(i));
    if (i == 7) continue;  // missing in the destination
    dst.column(0).AppendInt64(i);
    if (i == 20) {
      dst.column(1).AppendNull();  // different: NULL instead of a value
    } else if (i == 30) {
      dst.column(1).AppendBytes("other");  // different
    } else {
      dst.column(1).AppendBytes("v" + std::to_string(i));
    }
  }
  dst.column(0).AppendInt64(99);  // extra
  dst.column(1).AppendBytes("v99");
  auto a = Prints(src, true), b = Prints(dst, true);
  FingerprintDiff d = CompareFingerprints(&a, &b, 10);
  EXPECT_EQ(d.missing, 1u);
  EXPECT_EQ(d.extra, 1u);
  EXPECT_EQ(d.different, 2u);
  ASSERT_EQ(d.first.size(), 4u);
  std::map<DiffKind, int> kinds;
  for (const auto& [key, kind] : d.first) ++kinds[kind];
  EXPECT_EQ(kinds[DiffKind::kMissing], 1);
  EXPECT_EQ(kinds[DiffKind::kExtra], 1);
  EXPECT_EQ(kinds[DiffKind::kDifferent], 2);
  // At most max_keys are named; the counts stay complete.
  a = Prints(src, true);
  b = Prints(dst, true);
  d = CompareFingerprints(&a, &b, 2);
  EXPECT_EQ(d.first.size(), 2u);
  EXPECT_EQ(d.missing + d.extra + d.different, 4u);
}

TEST(CompareTest, KeylessTablesCompareAsMultisets) {
  Batch src(TwoColumns(DataType::String())), dst(TwoColumns(DataType::String()));
  for (int k = 0; k < 3; ++k) {  // the same row three times in the source
    src.column(0).AppendInt64(1);
    src.column(1).AppendBytes("dup");
  }
  for (int k = 0; k < 2; ++k) {  // twice in the destination
    dst.column(0).AppendInt64(1);
    dst.column(1).AppendBytes("dup");
  }
  auto a = Prints(src, false), b = Prints(dst, false);
  FingerprintDiff d = CompareFingerprints(&a, &b, 10);
  EXPECT_EQ(d.missing, 1u);
  EXPECT_EQ(d.extra, 0u);
  EXPECT_EQ(d.different, 0u);
  // A duplicate of a keyed row in the destination is extra.
  Batch keyed_src(TwoColumns(DataType::String())), keyed_dst(TwoColumns(DataType::String()));
  keyed_src.column(0).AppendInt64(5);
  keyed_src.column(1).AppendBytes("x");
  for (int k = 0; k < 2; ++k) {
    keyed_dst.column(0).AppendInt64(5);
    keyed_dst.column(1).AppendBytes("x");
  }
  a = Prints(keyed_src, true);
  b = Prints(keyed_dst, true);
  d = CompareFingerprints(&a, &b, 10);
  EXPECT_EQ(d.extra, 1u);
  EXPECT_EQ(d.missing + d.different, 0u);
}

TEST(CompareTest, EmptySides) {
  std::vector<Fingerprint> none, some{{1, 2}, {3, 4}};
  FingerprintDiff d = CompareFingerprints(&none, &some, 10);
  EXPECT_EQ(d.extra, 2u);
  std::vector<Fingerprint> none2;
  d = CompareFingerprints(&some, &none2, 10);
  EXPECT_EQ(d.missing, 2u);
  std::vector<Fingerprint> e1, e2;
  EXPECT_TRUE(CompareFingerprints(&e1, &e2, 10).empty());
}

}  // namespace
}  // namespace ferry::engine
