#include "ferry/lake/partition.h"

#include <gtest/gtest.h>

#include <limits>

#include "ferry/types/value_parse.h"
#include "ferry/types/value_text.h"

namespace ferry::lake {
namespace {

// One-row column of `type` holding what `fill` appends.
template <typename Fill>
Column One(const DataType& type, Fill fill) {
  Column c(type);
  fill(c);
  return c;
}

int32_t Bucket(const DataType& type, const Column& c) {
  // The spec's examples are the hash itself: bucket[2^31 - 1] of a value is hash & INT_MAX, so
  // compare the 31 low bits.
  return static_cast<int32_t>(
      ApplyTransform(Transform{TransformKind::kBucket, 2147483647}, type, c, 0).i);
}

int32_t Low31(int32_t h) { return h & 2147483647; }

TEST(PartitionTest, Murmur3MatchesTheSpecsHashExamples) {
  // The Iceberg table spec's appendix B: 32-bit hash requirements.
  EXPECT_EQ(Murmur3("iceberg"), 1210000089);
  EXPECT_EQ(Murmur3(std::string("\x00\x01\x02\x03", 4)), -188683207);
  const DataType i = DataType::Int32();
  EXPECT_EQ(Bucket(i, One(i, [](Column& c) { c.AppendInt32(34); })), Low31(2017239379));
  const DataType l = DataType::Int64();
  EXPECT_EQ(Bucket(l, One(l, [](Column& c) { c.AppendInt64(34); })), Low31(2017239379));
  const DataType d = DataType::Decimal(4, 2);
  EXPECT_EQ(Bucket(d, One(d, [](Column& c) { c.AppendDecimal(1420); })), Low31(-500754589));
  const DataType date = DataType::Date();
  EXPECT_EQ(Bucket(date, One(date,
                             [](Column& c) {
                               c.AppendInt32(static_cast<int32_t>(DaysFromCivil(2017, 11, 16)));
                             })),
            Low31(-653330422));
  const DataType time = DataType::Time();
  EXPECT_EQ(Bucket(time, One(time,
                             [](Column& c) {
                               c.AppendInt64((22 * 3600 + 31 * 60 + 8) * int64_t{1000000});
                             })),
            Low31(-662762989));
  const int64_t ts = DaysFromCivil(2017, 11, 16) * 86400 * int64_t{1000000} +
                     (22 * 3600 + 31 * 60 + 8) * int64_t{1000000};
  const DataType t = DataType::Timestamp();
  EXPECT_EQ(Bucket(t, One(t, [&](Column& c) { c.AppendInt64(ts); })), Low31(-2047944441));
  const DataType tz = DataType::TimestampTz();
  EXPECT_EQ(Bucket(tz, One(tz, [&](Column& c) { c.AppendInt64(ts); })), Low31(-2047944441));
  const DataType s = DataType::String();
  EXPECT_EQ(Bucket(s, One(s, [](Column& c) { c.AppendBytes("iceberg"); })), Low31(1210000089));
  const DataType u = DataType::Uuid();
  uint8_t uuid[16];
  ASSERT_TRUE(ParseUuid("f79c3e09-677c-4bbd-a479-3f349cb785e7", uuid).ok());
  EXPECT_EQ(Bucket(u, One(u, [&](Column& c) { c.AppendUuid(uuid); })), Low31(1488055340));
  const DataType b = DataType::Binary();
  EXPECT_EQ(Bucket(b, One(b, [](Column& c) { c.AppendBytes(std::string("\x00\x01\x02\x03", 4)); })),
            Low31(-188683207));
}

TEST(PartitionTest, TruncateFollowsTheSpecsExamples) {
  auto trunc = [](const DataType& type, const Column& c, int32_t w) {
    return ApplyTransform(Transform{TransformKind::kTruncate, w}, type, c, 0);
  };
  const DataType i = DataType::Int32();
  EXPECT_EQ(trunc(i, One(i, [](Column& c) { c.AppendInt32(1); }), 10).i, 0);
  EXPECT_EQ(trunc(i, One(i, [](Column& c) { c.AppendInt32(-1); }), 10).i, -10);
  const DataType l = DataType::Int64();
  EXPECT_EQ(trunc(l, One(l, [](Column& c) { c.AppendInt64(-1); }), 10).i, -10);
  const DataType d = DataType::Decimal(4, 2);
  EXPECT_EQ(trunc(d, One(d, [](Column& c) { c.AppendDecimal(1065); }), 50).dec, 1050);
  const DataType s = DataType::String();
  EXPECT_EQ(trunc(s, One(s, [](Column& c) { c.AppendBytes("iceberg"); }), 3).bytes, "ice");
  // Code points, not bytes: "ü" is two bytes.
  EXPECT_EQ(trunc(s, One(s, [](Column& c) { c.AppendBytes("\xc3\xbc\xc3\xbcx"); }), 2).bytes,
            "\xc3\xbc\xc3\xbc");
  const DataType b = DataType::Binary();
  EXPECT_EQ(
      trunc(b, One(b, [](Column& c) { c.AppendBytes(std::string("\x01\x02\x03\x04", 4)); }), 3)
          .bytes,
      std::string("\x01\x02\x03", 3));
}

TEST(PartitionTest, TimeTransformsCountFromTheEpochAndFloorBeforeIt) {
  const DataType t = DataType::Timestamp();
  const int64_t us =
      DaysFromCivil(2017, 11, 16) * 86400 * int64_t{1000000} + 22 * int64_t{3600} * 1000000;
  const Column c = One(t, [&](Column& col) {
    col.AppendInt64(us);
    col.AppendInt64(-1);  // 1969-12-31 23:59:59.999999
    col.AppendNull();
  });
  auto at = [&](TransformKind k, size_t row) { return ApplyTransform(Transform{k, 0}, t, c, row); };
  EXPECT_EQ(at(TransformKind::kYear, 0).i, 47);
  EXPECT_EQ(at(TransformKind::kMonth, 0).i, 47 * 12 + 10);
  EXPECT_EQ(at(TransformKind::kDay, 0).i, DaysFromCivil(2017, 11, 16));
  EXPECT_EQ(at(TransformKind::kHour, 0).i, DaysFromCivil(2017, 11, 16) * 24 + 22);
  EXPECT_EQ(at(TransformKind::kYear, 1).i, -1);
  EXPECT_EQ(at(TransformKind::kMonth, 1).i, -1);
  EXPECT_EQ(at(TransformKind::kDay, 1).i, -1);
  EXPECT_EQ(at(TransformKind::kHour, 1).i, -1);
  EXPECT_TRUE(at(TransformKind::kDay, 2).null);
  const DataType d = DataType::Date();
  const Column dc = One(d, [](Column& col) { col.AppendInt32(-1); });
  EXPECT_EQ(ApplyTransform(Transform{TransformKind::kYear, 0}, d, dc, 0).i, -1);
}

Schema Sample() {
  Schema s;
  s.fields = {{1, "id", DataType::Int64(), true, ""},
              {2, "created_at", DataType::Timestamp(), false, ""},
              {3, "sku", DataType::String(), false, ""},
              {4, "Region Name", DataType::String(), false, ""},
              {5, "price", DataType::Float64(), false, ""}};
  return s;
}

TEST(PartitionTest, TermsBecomeASpecWithJavasFieldNames) {
  auto spec = ParsePartitionBy(
      {"day(created_at)", "bucket(16, id)", "Region Name", "truncate(4, sku)", "bucket[8](sku)"},
      Sample());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ASSERT_EQ(spec->fields.size(), 5u);
  EXPECT_EQ(spec->fields[0].name, "created_at_day");
  EXPECT_EQ(spec->fields[0].field_id, 1000);
  EXPECT_EQ(spec->fields[1].name, "id_bucket");
  EXPECT_EQ(spec->fields[1].transform.ToString(), "bucket[16]");
  EXPECT_EQ(spec->fields[2].name, "Region Name");
  EXPECT_EQ(spec->fields[2].transform.kind, TransformKind::kIdentity);
  EXPECT_EQ(spec->fields[3].name, "sku_trunc");
  EXPECT_EQ(spec->fields[4].transform.param, 8);
  auto back = PartitionSpec::FromJson(spec->ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->SameLayout(*spec));
  EXPECT_EQ(spec->Describe(Sample()),
            "day(created_at), bucket[16](id), identity(Region Name), truncate[4](sku), "
            "bucket[8](sku)");
}

TEST(PartitionTest, BadTermsNameTheTermAndTheProblem) {
  auto err = [](const std::string& term) {
    auto s = ParsePartitionBy({term}, Sample());
    EXPECT_FALSE(s.ok()) << term;
    return s.status().message();
  };
  EXPECT_NE(err("day(sku)").find("does not apply to a column of type string"), std::string::npos);
  EXPECT_NE(err("hour(missing)").find("no column 'missing'"), std::string::npos);
  EXPECT_NE(err("bucket(0, id)").find("positive integer"), std::string::npos);
  EXPECT_NE(err("bucket(id)").find("takes a number and a column"), std::string::npos);
  EXPECT_NE(err("week(created_at)").find("unknown transform 'week'"), std::string::npos);
  EXPECT_NE(err("bucket(4, price)").find("bucket[4] does not apply"), std::string::npos);
  EXPECT_NE(err("nothing").find("no column of that name"), std::string::npos);
  auto twice = ParsePartitionBy({"day(created_at)", "day( created_at )"}, Sample());
  EXPECT_FALSE(twice.ok());
}

TEST(PartitionTest, TuplesKeysAndPathsOfRows) {
  auto schema = std::make_shared<Schema>(Sample());
  auto spec = ParsePartitionBy({"day(created_at)", "bucket(16, id)", "Region Name"}, *schema);
  ASSERT_TRUE(spec.ok());
  auto p = Partitioner::Make(*spec, *schema);
  ASSERT_TRUE(p.ok());
  Batch b(schema);
  for (int r = 0; r < 2; ++r) {
    b.column(0).AppendInt64(34);
    b.column(1).AppendInt64(DaysFromCivil(2024, 1, 31) * 86400 * int64_t{1000000});
    b.column(2).AppendBytes("x");
    if (r == 0) {
      b.column(3).AppendBytes("eu/west 1");
    } else {
      b.column(3).AppendNull();
    }
    b.column(4).AppendDouble(1);
  }
  const PartitionTuple a = p->Of(b, 0);
  const PartitionTuple n = p->Of(b, 1);
  EXPECT_EQ(a[1].i, Low31(2017239379) % 16);
  EXPECT_NE(PartitionKey(a), PartitionKey(n));
  EXPECT_EQ(PartitionKey(a), PartitionKey(p->Of(b, 0)));
  EXPECT_EQ(p->Path(a),
            "created_at_day=2024-01-31/id_bucket=" + std::to_string(Low31(2017239379) % 16) +
                "/Region%20Name=eu%2Fwest%201");
  EXPECT_EQ(p->Path(n).substr(p->Path(n).rfind('/') + 1), "Region%20Name=null");
  EXPECT_EQ(SingleValueBytes(DataType::Int32(), a[0]).size(), 4u);
}

// Integer-valued specs computed a column at a time give what Of gives row by row: every
// transform of ints, dates, times and timestamps, NULLs, values before the epoch.
TEST(PartitionTest, IntsOfAColumnAtATimeEqualTheTuplesOfEachRow) {
  auto schema = std::make_shared<Schema>();
  schema->fields = {
      {1, "i", DataType::Int32(), false, ""},        {2, "l", DataType::Int64(), false, ""},
      {3, "d", DataType::Date(), false, ""},         {4, "ts", DataType::Timestamp(), false, ""},
      {5, "tz", DataType::TimestampTz(), false, ""}, {6, "t", DataType::Time(), false, ""}};
  const std::vector<std::string> terms = {
      "bucket(7, i)", "truncate(10, l)", "year(d)",       "month(ts)",
      "day(tz)",      "hour(ts)",        "bucket(5, t)",  "l",
      "void(d)",      "bucket(3, d)",    "truncate(4, i)"};
  auto spec = ParsePartitionBy(terms, *schema);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  auto p = Partitioner::Make(*spec, *schema);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->int_valued());
  Batch b(schema);
  const int64_t micros[] = {-1, 0, 1, -86400000001LL, 1717171717171717LL, -5000000000000000LL};
  for (int r = 0; r < 60; ++r) {
    const int64_t m = micros[r % 6] + r * 3600000000LL;
    if (r % 7 == 3) {
      for (size_t c = 0; c < 6; ++c) b.column(c).AppendNull();
      continue;
    }
    b.column(0).AppendInt32(r * 37 - 1000);
    b.column(1).AppendInt64(-r * 1234567);
    b.column(2).AppendInt32(r * 100 - 3000);
    b.column(3).AppendInt64(m);
    b.column(4).AppendInt64(m * 3);
    b.column(5).AppendInt64((r * 1000003) % 86400000000LL);
  }
  std::vector<int64_t> values;
  std::vector<uint8_t> nulls;
  p->IntsOf(b, &values, &nulls);
  PartitionTuple t;
  for (size_t r = 0; r < b.num_rows(); ++r) {
    p->IntsTuple(values, nulls, b.num_rows(), r, &t);
    const PartitionTuple want = p->Of(b, r);
    ASSERT_EQ(t.size(), want.size());
    for (size_t f = 0; f < t.size(); ++f) {
      EXPECT_TRUE(t[f] == want[f])
          << "row " << r << " " << terms[f] << ": " << t[f].i << " vs " << want[f].i;
    }
    EXPECT_EQ(PartitionKey(t), PartitionKey(want));
  }
  // A spec over a string is not integer-valued.
  schema->fields.push_back({7, "s", DataType::String(), false, ""});
  auto mixed = Partitioner::Make(*ParsePartitionBy({"day(ts)", "s"}, *schema), *schema);
  ASSERT_TRUE(mixed.ok());
  EXPECT_FALSE(mixed->int_valued());
}

// Equal values are equal partitions, floats by their bits: a NaN partition is itself, -0.0 and
// 0.0 are two (as their keys and single-value bytes are).
TEST(PartitionTest, FloatPartitionValuesCompareByTheirBits) {
  PartitionValue nan;
  nan.null = false;
  nan.f = std::numeric_limits<double>::quiet_NaN();
  EXPECT_TRUE(nan == nan);
  PartitionValue zero = nan, minus_zero = nan;
  zero.f = 0.0;
  minus_zero.f = -0.0;
  EXPECT_FALSE(zero == minus_zero);
  EXPECT_NE(PartitionKey({zero}), PartitionKey({minus_zero}));
  EXPECT_EQ(PartitionKey({nan}), PartitionKey({nan}));
}

}  // namespace
}  // namespace ferry::lake
