#include "ferry/types/fingerprint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <set>

#include "ferry/types/value_parse.h"

namespace ferry {
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

}  // namespace
}  // namespace ferry
