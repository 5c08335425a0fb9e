#include "ferry/clients/postgres/copy_binary.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "ferry/types/value_parse.h"

namespace ferry::pg {
namespace {

// ---- building COPY binary bytes by hand ----
std::string Be16(uint16_t v) { return std::string{char(v >> 8), char(v & 0xFF)}; }
std::string Be32(uint32_t v) { return Be16(uint16_t(v >> 16)) + Be16(uint16_t(v & 0xFFFF)); }
std::string Be64(uint64_t v) { return Be32(uint32_t(v >> 32)) + Be32(uint32_t(v & 0xFFFFFFFF)); }
std::string Header() { return std::string("PGCOPY\n\377\r\n\0", 11) + Be32(0) + Be32(0); }
std::string Trailer() { return Be16(0xFFFF); }
std::string Val(const std::string& v) { return Be32(uint32_t(v.size())) + v; }
std::string Null() { return Be32(0xFFFFFFFF); }

// numeric send format: ndigits, weight, sign, dscale, base-10000 digits.
std::string Numeric(int16_t weight, uint16_t sign, uint16_t dscale, std::vector<uint16_t> digits) {
  std::string s =
      Be16(uint16_t(digits.size())) + Be16(uint16_t(weight)) + Be16(sign) + Be16(dscale);
  for (uint16_t d : digits) s += Be16(d);
  return s;
}

std::shared_ptr<const Schema> SchemaOf(std::vector<DataType> types) {
  auto s = std::make_shared<Schema>();
  int id = 0;
  for (auto& t : types) s->fields.push_back(Field{++id, "c" + std::to_string(id), t, false, ""});
  return s;
}

TEST(NumericTest, TextMatchesPostgresOutput) {
  // 12345.678 -> digits 1, 2345, 6780; weight 1; dscale 3.
  EXPECT_EQ(*NumericToText(Numeric(1, 0, 3, {1, 2345, 6780})), "12345.678");
  EXPECT_EQ(*NumericToText(Numeric(1, 0x4000, 3, {1, 2345, 6780})), "-12345.678");
  // 0.0001 -> weight -1, digit 1, dscale 4; 0.00 -> no digits, dscale 2.
  EXPECT_EQ(*NumericToText(Numeric(-1, 0, 4, {1})), "0.0001");
  EXPECT_EQ(*NumericToText(Numeric(0, 0, 2, {})), "0.00");
  EXPECT_EQ(*NumericToText(Numeric(0, 0, 0, {})), "0");
  // 10000000000 (trailing zero groups are not sent): weight 2, digit 1.
  EXPECT_EQ(*NumericToText(Numeric(2, 0, 0, {1})), "100000000");
  // 1.50 -> digits 1, 5000, dscale 2.
  EXPECT_EQ(*NumericToText(Numeric(0, 0, 2, {1, 5000})), "1.50");
  // 0.000012 -> weight -2, digits 12 (0.0000|12..) = 0.00001200 -> dscale 6.
  EXPECT_EQ(*NumericToText(Numeric(-2, 0, 6, {1200})), "0.000012");
  EXPECT_EQ(*NumericToText(Numeric(0, 0xC000, 0, {})), "NaN");
  EXPECT_EQ(*NumericToText(Numeric(0, 0xD000, 0, {})), "Infinity");
  EXPECT_EQ(*NumericToText(Numeric(0, 0xF000, 0, {})), "-Infinity");
}

TEST(NumericTest, DecimalIsExactOrRefused) {
  auto v = NumericToDecimal(Numeric(1, 0, 3, {1, 2345, 6780}), 10, 3);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  EXPECT_EQ(FormatDecimal(*v, 3), "12345.678");
  EXPECT_EQ(FormatDecimal(*NumericToDecimal(Numeric(1, 0x4000, 3, {1, 2345, 6780}), 10, 4), 4),
            "-12345.6780");
  EXPECT_EQ(FormatDecimal(*NumericToDecimal(Numeric(0, 0, 0, {}), 5, 2), 2), "0.00");
  // 38 nines with scale 0: 99 9999 ... (weight 9, first digit 99).
  std::vector<uint16_t> nines(10, 9999);
  nines[0] = 99;
  auto max38 = NumericToDecimal(Numeric(9, 0x4000, 0, nines), 38, 0);
  ASSERT_TRUE(max38.ok()) << max38.status().ToString();
  EXPECT_EQ(*max38, -(Pow10(38) - 1));
  // One more digit does not fit decimal(38,0).
  nines[0] = 999;
  EXPECT_EQ(NumericToDecimal(Numeric(9, 0, 0, nines), 38, 0).status().code(),
            StatusCode::kInvalidArgument);
  // 0.12345678901234567890123456789012345678 at decimal(38,38).
  auto frac = NumericToDecimal(
      Numeric(-1, 0, 38, {1234, 5678, 9012, 3456, 7890, 1234, 5678, 9012, 3456, 7800}), 38, 38);
  ASSERT_TRUE(frac.ok()) << frac.status().ToString();
  EXPECT_EQ(FormatDecimal(*frac, 38), "0.12345678901234567890123456789012345678");
  // Too many fraction digits; too many integer digits; NaN names the fix.
  EXPECT_FALSE(NumericToDecimal(Numeric(0, 0, 3, {1, 2345}), 10, 2).ok());
  EXPECT_FALSE(NumericToDecimal(Numeric(1, 0, 0, {1, 0}), 4, 0).ok());
  auto nan = NumericToDecimal(Numeric(0, 0xC000, 0, {}), 10, 2);
  ASSERT_FALSE(nan.ok());
  EXPECT_NE(nan.status().message().find("numeric without precision"), std::string::npos);
  // Malformed: a digit >= 10000, a length that disagrees with ndigits, a bad sign.
  EXPECT_EQ(NumericToText(Numeric(0, 0, 0, {10000})).status().code(), StatusCode::kCorruption);
  EXPECT_EQ(NumericToText(Numeric(0, 0, 0, {1}).substr(0, 9)).status().code(),
            StatusCode::kCorruption);
  EXPECT_EQ(NumericToText(Numeric(0, 0x1234, 0, {})).status().code(), StatusCode::kCorruption);
}

TEST(TextFormsTest, TimeTzAndInterval) {
  EXPECT_EQ(TimeTzToText(45296789000LL, -19800), "12:34:56.789+05:30");
  EXPECT_EQ(TimeTzToText(0, 0), "00:00:00+00");
  EXPECT_EQ(TimeTzToText(86400000000LL, 3600), "24:00:00-01");
  EXPECT_EQ(TimeTzToText(1, -(5 * 3600 + 30 * 60 + 15)), "00:00:00.000001+05:30:15");
  EXPECT_EQ(IntervalToText(0, 0, 0), "PT0S");
  EXPECT_EQ(IntervalToText(4 * 3600000000LL + 5 * 60000000LL + 6500000, 3, 14), "P1Y2M3DT4H5M6.5S");
  EXPECT_EQ(IntervalToText(-(1 * 3600000000LL + 500000), -2, -13), "P-1Y-1M-2DT-1H-0.5S");
  EXPECT_EQ(IntervalToText(0, 1, 0), "P1D");
}

TEST(CopyBinaryDecoderTest, DecodesEveryWireForm) {
  auto schema =
      SchemaOf({DataType::Boolean(), DataType::Int32(), DataType::Int32(), DataType::Int64(),
                DataType::Float32(), DataType::Float64(), DataType::Decimal(10, 2),
                DataType::String(), DataType::String(), DataType::Binary(), DataType::String(),
                DataType::Date(), DataType::Time(), DataType::String(), DataType::Timestamp(),
                DataType::TimestampTz(), DataType::String(), DataType::Uuid()});
  std::vector<CopyField> fields = {{"ctid", PgWire::kTid, -1}};
  std::vector<PgWire> wires = {PgWire::kBool,           PgWire::kInt2,        PgWire::kInt4,
                               PgWire::kInt8,           PgWire::kFloat4,      PgWire::kFloat8,
                               PgWire::kNumericDecimal, PgWire::kNumericText, PgWire::kText,
                               PgWire::kBytea,          PgWire::kJsonb,       PgWire::kDate,
                               PgWire::kTime,           PgWire::kTimeTz,      PgWire::kTimestamp,
                               PgWire::kTimestampTz,    PgWire::kInterval,    PgWire::kUuid};
  for (size_t i = 0; i < wires.size(); ++i)
    fields.push_back({"c" + std::to_string(i + 1), wires[i], int(i)});
  CopyBinaryDecoder dec(fields);
  Batch batch(schema);

  double neg_zero = -0.0;
  uint64_t nz_bits;
  std::memcpy(&nz_bits, &neg_zero, 8);
  float inf = INFINITY;
  uint32_t inf_bits;
  std::memcpy(&inf_bits, &inf, 4);
  std::string uuid("\x12\x34\x56\x78\x9a\xbc\xde\xf0\x01\x02\x03\x04\x05\x06\x07\x08", 16);
  std::string row1 =
      Be16(19) + Val(Be32(7) + Be16(3)) + Val("\x01") + Val(Be16(0x8000)) + Val(Be32(0x7FFFFFFF)) +
      Val(Be64(0x8000000000000000ULL)) + Val(Be32(inf_bits)) + Val(Be64(nz_bits)) +
      Val(Numeric(0, 0x4000, 2, {12, 3400})) + Val(Numeric(0, 0xC000, 0, {})) + Val("zoë 名") +
      Val(std::string("\0\xff", 2)) + Val("\x01{\"a\": 1}") + Val(Be32(uint32_t(-10957))) +
      Val(Be64(86399999999ULL)) + Val(Be64(45296789000ULL) + Be32(uint32_t(-19800))) +
      Val(Be64(0)) + Val(Be64(uint64_t(-946684800000000LL))) +
      Val(Be64(6500000) + Be32(3) + Be32(14)) + Val(uuid);
  std::string row2 = Be16(19) + Val(Be32(0) + Be16(4));
  for (int i = 0; i < 18; ++i) row2 += Null();
  std::string all = Header() + row1 + row2 + Trailer();
  // Fed byte by byte: tuples are decoded only when complete.
  for (char c : all) ASSERT_TRUE(dec.Feed(std::string_view(&c, 1), &batch).ok());
  ASSERT_TRUE(dec.Finish().ok());
  ASSERT_EQ(batch.num_rows(), 2u);
  EXPECT_EQ(batch.column(0).values<uint8_t>()[0], 1);
  EXPECT_EQ(batch.column(1).values<int32_t>()[0], -32768);
  EXPECT_EQ(batch.column(2).values<int32_t>()[0], 2147483647);
  EXPECT_EQ(batch.column(3).values<int64_t>()[0], INT64_MIN);
  EXPECT_TRUE(std::isinf(batch.column(4).values<float>()[0]));
  EXPECT_TRUE(std::signbit(batch.column(5).values<double>()[0]));
  EXPECT_EQ(FormatDecimal(batch.column(6).values<int128_t>()[0], 2), "-12.34");
  EXPECT_EQ(batch.column(7).GetBytes(0), "NaN");
  EXPECT_EQ(batch.column(8).GetBytes(0), "zoë 名");
  EXPECT_EQ(batch.column(9).GetBytes(0), std::string("\0\xff", 2));
  EXPECT_EQ(batch.column(10).GetBytes(0), "{\"a\": 1}");
  EXPECT_EQ(batch.column(11).values<int32_t>()[0], 0);  // 1970-01-01
  EXPECT_EQ(batch.column(12).values<int64_t>()[0], 86399999999LL);
  EXPECT_EQ(batch.column(13).GetBytes(0), "12:34:56.789+05:30");
  EXPECT_EQ(batch.column(14).values<int64_t>()[0], 946684800000000LL);  // 2000-01-01
  EXPECT_EQ(batch.column(15).values<int64_t>()[0], 0);
  EXPECT_EQ(batch.column(16).GetBytes(0), "P1Y2M3DT6.5S");
  EXPECT_EQ(std::memcmp(batch.column(17).fixed_data(), uuid.data(), 16), 0);
  for (size_t c = 0; c < 18; ++c) EXPECT_FALSE(batch.column(c).IsValid(1)) << c;
}

struct Case {
  std::string bytes;
  StatusCode code;
  const char* says;
};

TEST(CopyBinaryDecoderTest, RefusesMalformedAndUnrepresentable) {
  auto run = [](PgWire wire, DataType type, const std::string& body) {
    CopyBinaryDecoder dec({{"ctid", PgWire::kTid, -1}, {"v", wire, 0}});
    Batch batch(SchemaOf({type}));
    Status s = dec.Feed(Header() + body, &batch);
    if (s.ok()) s = dec.Finish();
    return s;
  };
  auto tuple = [](const std::string& v) {
    return Be16(2) + Val(Be32(5) + Be16(9)) + v + Trailer();
  };
  std::vector<std::tuple<PgWire, DataType, std::string, StatusCode, const char*>> cases = {
      {PgWire::kDate, DataType::Date(), tuple(Val(Be32(0x7FFFFFFF))), StatusCode::kInvalidArgument,
       "infinity"},
      {PgWire::kTimestampTz, DataType::TimestampTz(), tuple(Val(Be64(0x8000000000000000ULL))),
       StatusCode::kInvalidArgument, "-infinity"},
      {PgWire::kTimestamp, DataType::Timestamp(), tuple(Val(Be64(0x7FFFFFFFFFFFFF00ULL))),
       StatusCode::kInvalidArgument, "range"},
      {PgWire::kTime, DataType::Time(), tuple(Val(Be64(86400000000ULL))),
       StatusCode::kInvalidArgument, "24:00:00"},
      {PgWire::kNumericDecimal, DataType::Decimal(10, 2), tuple(Val(Numeric(0, 0xC000, 0, {}))),
       StatusCode::kInvalidArgument, "ctid (5,9)"},
      {PgWire::kText, DataType::String(), tuple(Val("\xc3\x28")), StatusCode::kInvalidArgument,
       "UTF-8"},
      {PgWire::kInt4, DataType::Int32(), tuple(Val(Be16(1))), StatusCode::kCorruption,
       "integer of 2 bytes"},
      {PgWire::kBool, DataType::Boolean(), tuple(Val("\x02")), StatusCode::kCorruption, "boolean"},
      {PgWire::kJsonb, DataType::String(), tuple(Val("\x02{}")), StatusCode::kCorruption,
       "version"},
      {PgWire::kInt4, DataType::Int32(), Be16(3) + Trailer(), StatusCode::kCorruption, "3 fields"},
      {PgWire::kInt4, DataType::Int32(), Be16(2) + Val(Be32(0) + Be16(1)) + Be32(0xFFFFFFFE),
       StatusCode::kCorruption, "length -2"},
      {PgWire::kInt4, DataType::Int32(), Be16(2) + Val(Be32(0) + Be16(1)) + Be32(4) + "ab",
       StatusCode::kCorruption, "without its trailer"},
      {PgWire::kInt4, DataType::Int32(), Trailer() + "x", StatusCode::kCorruption,
       "after its trailer"},
  };
  for (const auto& [wire, type, body, code, says] : cases) {
    Status s = run(wire, type, body);
    EXPECT_EQ(s.code(), code) << says << ": " << s.ToString();
    EXPECT_NE(s.message().find(says), std::string::npos) << s.message();
  }
  // A bad signature, flags with OIDs, a stream that ends inside its header.
  CopyBinaryDecoder dec({{"v", PgWire::kInt4, 0}});
  Batch batch(SchemaOf({DataType::Int32()}));
  EXPECT_EQ(dec.Feed("PGCOPY\n\377\r\n\1" + Be32(0) + Be32(0), &batch).code(),
            StatusCode::kCorruption);
  CopyBinaryDecoder dec2({{"v", PgWire::kInt4, 0}});
  EXPECT_EQ(
      dec2.Feed(std::string("PGCOPY\n\377\r\n\0", 11) + Be32(1 << 16) + Be32(0), &batch).code(),
      StatusCode::kCorruption);
  CopyBinaryDecoder dec3({{"v", PgWire::kInt4, 0}});
  EXPECT_TRUE(dec3.Feed("PGCO", &batch).ok());
  EXPECT_EQ(dec3.Finish().code(), StatusCode::kCorruption);
}

// ---- arrays ----

// array_send: ndim, has-NULL flag, element OID, per dimension size and lower bound, elements.
std::string Array(uint32_t elem_oid, const std::vector<std::pair<int32_t, int32_t>>& dims,
                  const std::vector<std::optional<std::string>>& elems) {
  bool has_null = false;
  for (const auto& e : elems) has_null |= !e.has_value();
  std::string s = Be32(uint32_t(dims.size())) + Be32(has_null ? 1 : 0) + Be32(elem_oid);
  for (auto [size, lower] : dims) s += Be32(uint32_t(size)) + Be32(uint32_t(lower));
  for (const auto& e : elems) s += e ? Val(*e) : Null();
  return s;
}

TEST(CopyBinaryTest, ArraysBecomeListsWithNullListsEmptyListsAndNullElements) {
  auto schema = SchemaOf({DataType::List(DataType::Int32(), false, 10),
                          DataType::List(DataType::String(), false, 11),
                          DataType::List(DataType::Decimal(10, 2), false, 12)});
  CopyBinaryDecoder dec({{"ints", PgArrayOf(PgWire::kInt4), 0},
                         {"texts", PgArrayOf(PgWire::kText), 1},
                         {"nums", PgArrayOf(PgWire::kNumericDecimal), 2}});
  Batch b(schema);
  std::string in = Header();
  // {1,NULL,-2147483648} | {"a",""} | {1.50}
  in += Be16(3) + Val(Array(23, {{3, 1}}, {Be32(1), std::nullopt, Be32(0x80000000)})) +
        Val(Array(25, {{2, 1}}, {std::string("a"), std::string()})) +
        Val(Array(1700, {{1, 1}}, {Numeric(0, 0, 2, {1, 5000})}));
  // NULL | {} (ndim 0) | {NULL}; the lower bound of [0:0] is not kept.
  in += Be16(3) + Null() + Val(Array(25, {}, {})) + Val(Array(1700, {{1, 0}}, {std::nullopt}));
  in += Trailer();
  ASSERT_TRUE(dec.Feed(in, &b).ok());
  ASSERT_TRUE(dec.Finish().ok());
  ASSERT_EQ(b.num_rows(), 2u);
  const Column& ints = b.column(0);
  EXPECT_EQ(ints.ListRange(0), std::make_pair(size_t{0}, size_t{3}));
  EXPECT_EQ(ints.list_child().values<int32_t>()[0], 1);
  EXPECT_FALSE(ints.list_child().IsValid(1));
  EXPECT_EQ(ints.list_child().values<int32_t>()[2], std::numeric_limits<int32_t>::min());
  EXPECT_FALSE(ints.IsValid(1));
  const Column& texts = b.column(1);
  EXPECT_EQ(texts.list_child().GetBytes(0), "a");
  EXPECT_EQ(texts.list_child().GetBytes(1), "");
  EXPECT_TRUE(texts.IsValid(1));
  EXPECT_EQ(texts.ListRange(1), std::make_pair(size_t{2}, size_t{2}));
  const Column& nums = b.column(2);
  EXPECT_EQ(FormatDecimal(nums.list_child().values<int128_t>()[0], 2), "1.50");
  EXPECT_EQ(nums.ListRange(1), std::make_pair(size_t{1}, size_t{2}));
  EXPECT_FALSE(nums.list_child().IsValid(1));
}

TEST(CopyBinaryTest, ArraysRefuseMoreDimensionsAndBadElementsNamingTheColumn) {
  auto schema = SchemaOf({DataType::List(DataType::Int32(), false, 10)});
  {
    CopyBinaryDecoder dec({{"grid", PgArrayOf(PgWire::kInt4), 0}});
    Batch b(schema);
    std::string in =
        Header() + Be16(1) + Val(Array(23, {{2, 1}, {1, 1}}, {Be32(1), Be32(2)})) + Trailer();
    Status s = dec.Feed(in, &b);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("grid"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("2-dimensional"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("to_jsonb"), std::string::npos) << s.message();
  }
  // A malformed element is corruption; nothing of the list is left behind.
  Column col(DataType::List(DataType::Int32(), false, 10));
  Status s = DecodePgValue(PgArrayOf(PgWire::kInt4), Array(23, {{2, 1}}, {Be32(7), Be16(1)}), &col);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("array element 2"), std::string::npos) << s.message();
  EXPECT_EQ(col.size(), 0u);
  EXPECT_EQ(col.list_child().size(), 0u);
  // Counts that the bytes cannot hold, a NULL the header denies, trailing bytes, cut headers.
  std::string lying = Array(23, {{1000000, 1}}, {Be32(1)});
  EXPECT_EQ(DecodePgValue(PgArrayOf(PgWire::kInt4), lying, &col).code(), StatusCode::kCorruption);
  std::string denied = Be32(1) + Be32(0) + Be32(23) + Be32(1) + Be32(1) + Null();
  EXPECT_EQ(DecodePgValue(PgArrayOf(PgWire::kInt4), denied, &col).code(), StatusCode::kCorruption);
  std::string trailing = Array(23, {{1, 1}}, {Be32(1)}) + "x";
  EXPECT_EQ(DecodePgValue(PgArrayOf(PgWire::kInt4), trailing, &col).code(),
            StatusCode::kCorruption);
  EXPECT_EQ(DecodePgValue(PgArrayOf(PgWire::kInt4), Be32(1), &col).code(), StatusCode::kCorruption);
  EXPECT_EQ(col.size(), 0u);
  // Element values are checked as single values are: an infinite date is refused.
  Column dates(DataType::List(DataType::Date(), false, 10));
  s = DecodePgValue(PgArrayOf(PgWire::kDate), Array(1082, {{1, 1}}, {Be32(0x7FFFFFFF)}), &dates);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("infinity"), std::string::npos) << s.message();
  // One value at a time (the CDC path) appends one list row.
  ASSERT_TRUE(
      DecodePgValue(PgArrayOf(PgWire::kInt4), Array(23, {{2, 1}}, {Be32(5), Be32(6)}), &col).ok());
  EXPECT_EQ(col.size(), 1u);
  EXPECT_EQ(col.list_child().size(), 2u);
}

// Values from a log older than an ALTER COLUMN ... TYPE: widened exactly into the new type's
// form, so that they decode as the column's values do now; nothing else is rewritten.
TEST(WidenTest, OlderIntegersAndFloatsTakeTheWiderForm) {
  std::string v = Be32(uint32_t(-7));
  ASSERT_TRUE(WidenPgValue(PgWire::kInt4, PgWire::kInt8, &v).ok());
  EXPECT_EQ(v, Be64(uint64_t(-7)));
  v = Be16(uint16_t(-32768));
  ASSERT_TRUE(WidenPgValue(PgWire::kInt2, PgWire::kInt4, &v).ok());
  EXPECT_EQ(v, Be32(uint32_t(-32768)));
  v = Be32(0xFFFFFFFFu);  // oid 4294967295: no sign
  ASSERT_TRUE(WidenPgValue(PgWire::kOid, PgWire::kInt8, &v).ok());
  EXPECT_EQ(v, Be64(0xFFFFFFFFull));
  for (float f : {1.1f, -0.0f, std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::denorm_min()}) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    v = Be32(bits);
    ASSERT_TRUE(WidenPgValue(PgWire::kFloat4, PgWire::kFloat8, &v).ok());
    Column col(DataType::Float64());
    ASSERT_TRUE(DecodePgValue(PgWire::kFloat8, v, &col).ok());
    EXPECT_EQ(std::signbit(col.values<double>()[0]), std::signbit(f));
    EXPECT_EQ(col.values<double>()[0], static_cast<double>(f));
  }
  v = "same";
  ASSERT_TRUE(WidenPgValue(PgWire::kText, PgWire::kText, &v).ok());
  EXPECT_EQ(v, "same");
  EXPECT_FALSE(PgWireWidens(PgWire::kInt8, PgWire::kInt4));  // narrowing
  EXPECT_FALSE(PgWireWidens(PgWire::kInt4, PgWire::kText));
  EXPECT_FALSE(PgWireWidens(PgWire::kText, PgWire::kJsonb));  // json's text is not jsonb's
  EXPECT_FALSE(PgWireWidens(PgArrayOf(PgWire::kInt4), PgArrayOf(PgWire::kInt8)));
  v = Be64(1);
  EXPECT_EQ(WidenPgValue(PgWire::kInt8, PgWire::kInt4, &v).code(), StatusCode::kInvalidArgument);
  v = Be16(1);
  EXPECT_EQ(WidenPgValue(PgWire::kInt4, PgWire::kInt8, &v).code(), StatusCode::kCorruption);
}

}  // namespace
}  // namespace ferry::pg
