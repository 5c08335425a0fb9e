#include "ferry/engine/verify.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "ferry/types/value_parse.h"

namespace ferry::engine {
namespace {

// The canonical encoding of a one-value column.
template <typename Fill>
std::string Canon(DataType type, Fill fill) {
  Column c(type);
  fill(c);
  std::string out;
  AppendCanonicalValue(c, 0, &out);
  return out;
}

std::string CanonNull(DataType type) {
  return Canon(type, [](Column& c) { c.AppendNull(); });
}

TEST(CanonicalValueTest, IntegersCompareAcrossWidths) {
  EXPECT_EQ(Canon(DataType::Int32(), [](Column& c) { c.AppendInt32(-7); }),
            Canon(DataType::Int64(), [](Column& c) { c.AppendInt64(-7); }));
  EXPECT_NE(Canon(DataType::Int32(), [](Column& c) { c.AppendInt32(7); }),
            Canon(DataType::Int64(), [](Column& c) { c.AppendInt64(8); }));
}

TEST(CanonicalValueTest, ListsCompareElementByElement) {
  auto ints = [](std::vector<std::optional<int64_t>> v, bool wide) {
    DataType type = DataType::List(wide ? DataType::Int64() : DataType::Int32(), false, 2);
    return Canon(type, [&](Column& c) {
      for (const auto& e : v) {
        if (!e) {
          c.list_child().AppendNull();
        } else if (wide) {
          c.list_child().AppendInt64(*e);
        } else {
          c.list_child().AppendInt32(static_cast<int32_t>(*e));
        }
      }
      c.AppendListEnd();
    });
  };
  EXPECT_EQ(ints({1, std::nullopt}, false), ints({1, std::nullopt}, true));
  EXPECT_NE(ints({1}, false), ints({1, std::nullopt}, false));
  EXPECT_NE(ints({1, 2}, false), ints({2, 1}, false));
  EXPECT_NE(ints({}, false), CanonNull(DataType::List(DataType::Int32(), false, 2)));
  Column c(DataType::List(DataType::String(), false, 2));
  c.list_child().AppendBytes("a");
  c.list_child().AppendNull();
  c.AppendListEnd();
  EXPECT_EQ(DisplayValue(c, 0), "['a', NULL]");
}

TEST(CanonicalValueTest, FloatsWidenNaNsAreOneValueSignedZerosAreNot) {
  EXPECT_EQ(Canon(DataType::Float32(), [](Column& c) { c.AppendFloat(0.25f); }),
            Canon(DataType::Float64(), [](Column& c) { c.AppendDouble(0.25); }));
  const double nan1 = std::numeric_limits<double>::quiet_NaN();
  const double nan2 = -std::nan("7");  // another payload, sign bit set
  EXPECT_EQ(Canon(DataType::Float64(), [&](Column& c) { c.AppendDouble(nan1); }),
            Canon(DataType::Float64(), [&](Column& c) { c.AppendDouble(nan2); }));
  EXPECT_EQ(Canon(DataType::Float32(),
                  [](Column& c) { c.AppendFloat(std::numeric_limits<float>::quiet_NaN()); }),
            Canon(DataType::Float64(), [&](Column& c) { c.AppendDouble(nan1); }));
  EXPECT_NE(Canon(DataType::Float64(), [](Column& c) { c.AppendDouble(0.0); }),
            Canon(DataType::Float64(), [](Column& c) { c.AppendDouble(-0.0); }));
  // 0.1f widened is not the double 0.1: the destination must hold what the source held.
  EXPECT_NE(Canon(DataType::Float32(), [](Column& c) { c.AppendFloat(0.1f); }),
            Canon(DataType::Float64(), [](Column& c) { c.AppendDouble(0.1); }));
}

TEST(CanonicalValueTest, DecimalsCompareByValueAtAnyScale) {
  // 12.50 at scale 2 (table) and 12.5 at scale 1; precision does not matter.
  EXPECT_EQ(Canon(DataType::Decimal(10, 2), [](Column& c) { c.AppendDecimal(1250); }),
            Canon(DataType::Decimal(38, 1), [](Column& c) { c.AppendDecimal(125); }));
  EXPECT_EQ(Canon(DataType::Decimal(10, 2), [](Column& c) { c.AppendDecimal(0); }),
            Canon(DataType::Decimal(10, 0), [](Column& c) { c.AppendDecimal(0); }));
  EXPECT_NE(Canon(DataType::Decimal(10, 2), [](Column& c) { c.AppendDecimal(1250); }),
            Canon(DataType::Decimal(10, 2), [](Column& c) { c.AppendDecimal(1251); }));
  // 125 (scale 0) is not 1.25 (scale 2).
  EXPECT_NE(Canon(DataType::Decimal(10, 0), [](Column& c) { c.AppendDecimal(125); }),
            Canon(DataType::Decimal(10, 2), [](Column& c) { c.AppendDecimal(125); }));
  const int128_t big = Pow10(36) * 9;  // 9e37 fits 38 digits at scale 0 and 1
  EXPECT_EQ(Canon(DataType::Decimal(38, 0), [&](Column& c) { c.AppendDecimal(big); }),
            Canon(DataType::Decimal(38, 1), [&](Column& c) { c.AppendDecimal(big * 10); }));
}

TEST(CanonicalValueTest, TimesKeepTheirKind) {
  auto ts = Canon(DataType::Timestamp(), [](Column& c) { c.AppendInt64(1717218000000001); });
  EXPECT_EQ(ts, Canon(DataType::Timestamp(), [](Column& c) { c.AppendInt64(1717218000000001); }));
  EXPECT_NE(ts, Canon(DataType::TimestampTz(), [](Column& c) { c.AppendInt64(1717218000000001); }));
  EXPECT_NE(ts, Canon(DataType::Int64(), [](Column& c) { c.AppendInt64(1717218000000001); }));
  EXPECT_NE(ts, Canon(DataType::Timestamp(), [](Column& c) { c.AppendInt64(1717218000000000); }));
  EXPECT_NE(Canon(DataType::Date(), [](Column& c) { c.AppendInt32(5); }),
            Canon(DataType::Int32(), [](Column& c) { c.AppendInt32(5); }));
}

TEST(CanonicalValueTest, StringsAreBytesAndNullIsNotEmpty) {
  EXPECT_EQ(Canon(DataType::String(), [](Column& c) { c.AppendBytes("h\xc3\xa9"); }),
            Canon(DataType::Binary(), [](Column& c) { c.AppendBytes("h\xc3\xa9"); }));
  EXPECT_NE(Canon(DataType::String(), [](Column& c) { c.AppendBytes("a"); }),
            Canon(DataType::String(), [](Column& c) { c.AppendBytes("A"); }));
  EXPECT_NE(Canon(DataType::String(), [](Column& c) { c.AppendBytes(""); }),
            CanonNull(DataType::String()));
  EXPECT_NE(Canon(DataType::Int64(), [](Column& c) { c.AppendInt64(0); }),
            CanonNull(DataType::Int64()));
  // NULLs of every type are alike: a NULL is a NULL.
  EXPECT_EQ(CanonNull(DataType::String()), CanonNull(DataType::Int64()));
}

TEST(CanonicalValueTest, ConcatenatedColumnsDoNotRunTogether) {
  // ("ab", "c") and ("a", "bc") must differ: lengths are part of the encoding.
  Column a(DataType::String()), b(DataType::String());
  a.AppendBytes("ab");
  b.AppendBytes("c");
  a.AppendBytes("a");
  b.AppendBytes("bc");
  std::string r0, r1;
  AppendCanonicalValue(a, 0, &r0);
  AppendCanonicalValue(b, 0, &r0);
  AppendCanonicalValue(a, 1, &r1);
  AppendCanonicalValue(b, 1, &r1);
  EXPECT_NE(r0, r1);
}

TEST(HashTest, DistinctInputsHashApart) {
  std::set<uint64_t> seen;
  std::string s;
  for (int i = 0; i < 20000; ++i) {
    s.assign(reinterpret_cast<const char*>(&i), sizeof i);
    seen.insert(Hash64(s, 1));
  }
  EXPECT_EQ(seen.size(), 20000u);
  seen.clear();
  for (size_t n = 0; n < 64; ++n) seen.insert(Hash64(std::string(n, 'x'), 1));  // lengths
  EXPECT_EQ(seen.size(), 64u);
  EXPECT_NE(Hash64("abc", 1), Hash64("abc", 2));
  EXPECT_EQ(Hash64("abc", 1), Hash64(std::string("abc"), 1));
  EXPECT_NE(Hash64("", 1), Hash64(std::string(1, '\0'), 1));
}

TEST(DisplayValueTest, ShowsValuesAsText) {
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
