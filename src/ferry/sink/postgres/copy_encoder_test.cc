#include "ferry/sink/postgres/copy_encoder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "ferry/clients/postgres/copy_binary.h"
#include "ferry/types/value_parse.h"

namespace ferry::sink::pg {
namespace {

using ferry::pg::CopyBinaryDecoder;
using ferry::pg::CopyField;
using ferry::pg::DecodePgValue;
using ferry::pg::PgArrayOf;
using ferry::pg::PgWire;

constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int32_t kI32Min = std::numeric_limits<int32_t>::min();
constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kMicrosPerDay = 86400LL * 1000000;

// ---- reading and writing big-endian bytes ----
uint16_t Be16(const char* p) {
  return static_cast<uint16_t>((static_cast<uint8_t>(p[0]) << 8) | static_cast<uint8_t>(p[1]));
}
uint32_t Be32(const char* p) { return (uint32_t{Be16(p)} << 16) | Be16(p + 2); }
std::string B16(uint16_t v) { return std::string{char(v >> 8), char(v & 0xFF)}; }
std::string B32(uint32_t v) { return B16(uint16_t(v >> 16)) + B16(uint16_t(v & 0xFFFF)); }
std::string B64(uint64_t v) { return B32(uint32_t(v >> 32)) + B32(uint32_t(v & 0xFFFFFFFF)); }
std::string Numeric(int16_t weight, uint16_t sign, uint16_t dscale, std::vector<uint16_t> digits) {
  std::string s = B16(uint16_t(digits.size())) + B16(uint16_t(weight)) + B16(sign) + B16(dscale);
  for (uint16_t d : digits) s += B16(d);
  return s;
}

// The decoder's wire form for a column ferry created with PgTypeName(type).
PgWire WireOf(const DataType& t) {
  switch (t.kind()) {
    case TypeKind::kBoolean:
      return PgWire::kBool;
    case TypeKind::kInt32:
      return PgWire::kInt4;
    case TypeKind::kInt64:
      return PgWire::kInt8;
    case TypeKind::kFloat32:
      return PgWire::kFloat4;
    case TypeKind::kFloat64:
      return PgWire::kFloat8;
    case TypeKind::kDecimal:
      return PgWire::kNumericDecimal;
    case TypeKind::kDate:
      return PgWire::kDate;
    case TypeKind::kTime:
      return PgWire::kTime;
    case TypeKind::kTimestamp:
      return PgWire::kTimestamp;
    case TypeKind::kTimestampTz:
      return PgWire::kTimestampTz;
    case TypeKind::kString:
      return PgWire::kText;
    case TypeKind::kBinary:
      return PgWire::kBytea;
    case TypeKind::kUuid:
      return PgWire::kUuid;
    case TypeKind::kList:
      return PgArrayOf(WireOf(t.list().type));
  }
  return PgWire::kText;
}

std::shared_ptr<const Schema> SchemaOf(std::vector<DataType> types) {
  auto s = std::make_shared<Schema>();
  int id = 0;
  for (auto& t : types) s->fields.push_back(Field{++id, "c" + std::to_string(id), t, false, ""});
  return s;
}

// Row i of a and row j of b hold the same value (bit for bit: NaN payloads and -0 count).
::testing::AssertionResult SameValue(const Column& a, size_t i, const Column& b, size_t j) {
  if (a.IsValid(i) != b.IsValid(j)) {
    return ::testing::AssertionFailure() << "validity " << a.IsValid(i) << " vs " << b.IsValid(j);
  }
  if (!a.IsValid(i)) return ::testing::AssertionSuccess();
  const DataType& t = a.type();
  if (t.is_list()) {
    auto [af, ae] = a.ListRange(i);
    auto [bf, be] = b.ListRange(j);
    if (ae - af != be - bf) {
      return ::testing::AssertionFailure() << "list of " << ae - af << " vs " << be - bf;
    }
    for (size_t k = 0; k < ae - af; ++k) {
      auto r = SameValue(a.list_child(), af + k, b.list_child(), bf + k);
      if (!r) return r << " (element " << k << ")";
    }
    return ::testing::AssertionSuccess();
  }
  if (t.IsVariableWidth()) {
    if (a.GetBytes(i) == b.GetBytes(j)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << "'" << a.GetBytes(i) << "' vs '" << b.GetBytes(j) << "'";
  }
  const auto w = static_cast<size_t>(t.FixedWidth());
  if (std::memcmp(a.fixed_data() + i * w, b.fixed_data() + j * w, w) == 0) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "fixed-width bytes differ";
}

std::string Encode(const Batch& batch, const std::vector<size_t>& columns) {
  std::string out;
  AppendCopyHeader(&out);
  Status s = AppendCopyRows(batch, columns, &out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  AppendCopyTrailer(&out);
  return out;
}

// Encodes `columns` of `batch`, then reads the stream back two ways: walking the tuples by hand
// with DecodePgValue per field (each field's bytes also compared with AppendPgValue's), and with
// the COPY decoder. Both must give back the original columns.
void ExpectRoundTrip(const Batch& batch, std::vector<size_t> columns) {
  const std::string stream = Encode(batch, columns);
  ASSERT_GE(stream.size(), 21u);
  ASSERT_EQ(stream.substr(0, 19), std::string("PGCOPY\n\377\r\n\0", 11) + std::string(8, '\0'));
  std::vector<Column> decoded;
  for (size_t c : columns) decoded.emplace_back(batch.column(c).type());
  size_t p = 19;
  size_t rows = 0;
  for (;;) {
    ASSERT_LE(p + 2, stream.size());
    const auto count = static_cast<int16_t>(Be16(stream.data() + p));
    p += 2;
    if (count == -1) break;
    ASSERT_EQ(count, static_cast<int16_t>(columns.size()));
    ASSERT_LT(rows, batch.num_rows());
    for (size_t k = 0; k < columns.size(); ++k) {
      ASSERT_LE(p + 4, stream.size());
      const auto len = static_cast<int32_t>(Be32(stream.data() + p));
      p += 4;
      const Column& original = batch.column(columns[k]);
      if (len == -1) {
        ASSERT_FALSE(original.IsValid(rows)) << "column " << k << " row " << rows;
        decoded[k].AppendNull();
        continue;
      }
      ASSERT_GE(len, 0);
      ASSERT_LE(p + size_t(len), stream.size());
      std::string_view value(stream.data() + p, size_t(len));
      p += size_t(len);
      Status s = DecodePgValue(WireOf(original.type()), value, &decoded[k]);
      ASSERT_TRUE(s.ok()) << "column " << k << " row " << rows << ": " << s.ToString();
      std::string single = "prefix";
      ASSERT_TRUE(AppendPgValue(original, rows, &single).ok());
      EXPECT_EQ(single, "prefix" + std::string(value)) << "column " << k << " row " << rows;
    }
    ++rows;
  }
  ASSERT_EQ(p, stream.size()) << "bytes after the trailer";
  ASSERT_EQ(rows, batch.num_rows());
  for (size_t k = 0; k < columns.size(); ++k) {
    for (size_t r = 0; r < rows; ++r) {
      EXPECT_TRUE(SameValue(batch.column(columns[k]), r, decoded[k], r))
          << "column " << k << " row " << r;
    }
  }

  // The stream as a whole, through the decoder the Postgres source uses.
  std::vector<CopyField> fields;
  std::vector<DataType> types;
  for (size_t k = 0; k < columns.size(); ++k) {
    const DataType& t = batch.column(columns[k]).type();
    fields.push_back({"f" + std::to_string(k), WireOf(t), static_cast<int>(k)});
    types.push_back(t);
  }
  CopyBinaryDecoder dec(fields);
  Batch back(SchemaOf(types));
  Status s = dec.Feed(stream, &back);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(dec.Finish().ok());
  for (size_t k = 0; k < columns.size(); ++k) {
    ASSERT_EQ(back.column(k).size(), batch.num_rows());
    for (size_t r = 0; r < rows; ++r) {
      EXPECT_TRUE(SameValue(batch.column(columns[k]), r, back.column(k), r))
          << "decoder: column " << k << " row " << r;
    }
  }
}

std::vector<size_t> All(const Batch& b) {
  std::vector<size_t> v(b.num_columns());
  for (size_t i = 0; i < v.size(); ++i) v[i] = i;
  return v;
}

float FloatBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
double DoubleBits(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}

TEST(PgTypeTest, NamesAndOids) {
  struct Case {
    DataType type;
    const char* name;
    uint32_t oid;
  };
  std::vector<Case> cases = {
      {DataType::Boolean(), "boolean", 16},
      {DataType::Int32(), "integer", 23},
      {DataType::Int64(), "bigint", 20},
      {DataType::Float32(), "real", 700},
      {DataType::Float64(), "double precision", 701},
      {DataType::Decimal(38, 10), "numeric(38,10)", 1700},
      {DataType::Date(), "date", 1082},
      {DataType::Time(), "time without time zone", 1083},
      {DataType::Timestamp(), "timestamp without time zone", 1114},
      {DataType::TimestampTz(), "timestamp with time zone", 1184},
      {DataType::String(), "text", 25},
      {DataType::Binary(), "bytea", 17},
      {DataType::Uuid(), "uuid", 2950},
      {DataType::List(DataType::Boolean(), false), "boolean[]", 1000},
      {DataType::List(DataType::Int32(), false), "integer[]", 1007},
      {DataType::List(DataType::Int64(), true), "bigint[]", 1016},
      {DataType::List(DataType::Float32(), false), "real[]", 1021},
      {DataType::List(DataType::Float64(), false), "double precision[]", 1022},
      {DataType::List(DataType::Decimal(10, 2), false), "numeric(10,2)[]", 1231},
      {DataType::List(DataType::Date(), false), "date[]", 1182},
      {DataType::List(DataType::Time(), false), "time without time zone[]", 1183},
      {DataType::List(DataType::Timestamp(), false), "timestamp without time zone[]", 1115},
      {DataType::List(DataType::TimestampTz(), false), "timestamp with time zone[]", 1185},
      {DataType::List(DataType::String(), false), "text[]", 1009},
      {DataType::List(DataType::Binary(), false), "bytea[]", 1001},
      {DataType::List(DataType::Uuid(), false), "uuid[]", 2951},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(PgTypeName(c.type), c.name);
    EXPECT_EQ(PgTypeOid(c.type), c.oid) << c.name;
  }
}

TEST(CopyEncoderTest, HeaderAndTrailer) {
  std::string out = "x";
  AppendCopyHeader(&out);
  AppendCopyTrailer(&out);
  EXPECT_EQ(out, "x" + std::string("PGCOPY\n\377\r\n\0", 11) + std::string(8, '\0') + "\xFF\xFF");
  // A stream of no rows is one the decoder accepts.
  CopyBinaryDecoder dec({{"v", PgWire::kInt4, 0}});
  Batch b(SchemaOf({DataType::Int32()}));
  ASSERT_TRUE(dec.Feed(out.substr(1), &b).ok());
  EXPECT_TRUE(dec.Finish().ok());
}

TEST(CopyEncoderTest, RoundTripsFixedWidthExtremes) {
  Batch b(SchemaOf({DataType::Boolean(), DataType::Int32(), DataType::Int64(), DataType::Float32(),
                    DataType::Float64(), DataType::Uuid()}));
  const uint8_t uuid1[16] = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0,
                             0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08};
  uint8_t zero[16] = {};
  uint8_t ones[16];
  std::memset(ones, 0xFF, 16);
  const std::vector<int32_t> i32 = {0, 1, -1, kI32Min, kI32Max, 42, 0};
  const std::vector<int64_t> i64 = {0, 1, -1, kI64Min, kI64Max, 1LL << 40, 0};
  const std::vector<float> f32 = {0.0f,
                                  -0.0f,
                                  std::numeric_limits<float>::quiet_NaN(),
                                  std::numeric_limits<float>::infinity(),
                                  -std::numeric_limits<float>::infinity(),
                                  FloatBits(0x7FC00123),  // a NaN with a payload
                                  std::numeric_limits<float>::denorm_min()};
  const std::vector<double> f64 = {0.0,
                                   -0.0,
                                   std::numeric_limits<double>::quiet_NaN(),
                                   std::numeric_limits<double>::infinity(),
                                   -std::numeric_limits<double>::infinity(),
                                   DoubleBits(0xFFF8000000000123ULL),
                                   std::numeric_limits<double>::max()};
  const uint8_t* uuids[] = {uuid1, zero, ones, uuid1, zero, ones, uuid1};
  for (size_t r = 0; r < i32.size(); ++r) {
    b.column(0).AppendBool(r % 2 == 0);
    b.column(1).AppendInt32(i32[r]);
    b.column(2).AppendInt64(i64[r]);
    b.column(3).AppendFloat(f32[r]);
    b.column(4).AppendDouble(f64[r]);
    b.column(5).AppendUuid(uuids[r]);
  }
  for (size_t c = 0; c < b.num_columns(); ++c) b.column(c).AppendNull();
  ExpectRoundTrip(b, All(b));
  // The wire bytes of a few: bool 1 byte, int8 big-endian, -0.0 as its sign bit.
  std::string v;
  ASSERT_TRUE(AppendPgValue(b.column(0), 0, &v).ok());
  ASSERT_TRUE(AppendPgValue(b.column(2), 3, &v).ok());
  ASSERT_TRUE(AppendPgValue(b.column(4), 1, &v).ok());
  ASSERT_TRUE(AppendPgValue(b.column(5), 0, &v).ok());
  EXPECT_EQ(v, "\x01" + B64(0x8000000000000000ULL) + B64(0x8000000000000000ULL) +
                   std::string(reinterpret_cast<const char*>(uuid1), 16));
}

TEST(CopyEncoderTest, RoundTripsDecimals) {
  const int128_t max38 = Pow10(38) - 1;
  Batch b(SchemaOf({DataType::Decimal(38, 0), DataType::Decimal(5, 2), DataType::Decimal(38, 38),
                    DataType::Decimal(20, 4), DataType::Decimal(1, 0)}));
  const std::vector<std::vector<int128_t>> cols = {
      {max38, -max38, 0, 1, -1, Pow10(8), -Pow10(20) * 7, int128_t(1) << 64},
      {1230, -1, 0, 99999, -99999, 100, 5, -12345},
      {max38, -max38, 0, 1, -1, Pow10(37), 12345678, -Pow10(30) - 1},
      {-1, 0, Pow10(20) - 1, -(Pow10(20) - 1), 10000, 123456789012345LL, Pow10(19), 50},
      {0, 9, -9, 1, -1, 5, 0, 3},
  };
  for (size_t c = 0; c < cols.size(); ++c) {
    for (int128_t v : cols[c]) b.column(c).AppendDecimal(v);
    b.column(c).AppendNull();
  }
  ExpectRoundTrip(b, All(b));

  // Every scale of decimal(38,s), with values on both sides of 64 bits and digit-group edges.
  for (int s = 0; s <= 38; ++s) {
    Batch d(SchemaOf({DataType::Decimal(38, s)}));
    Column& col = d.column(0);
    for (int k = 0; k < 38; ++k) {
      for (int128_t v : {Pow10(k), Pow10(k) - 1, Pow10(k) + 1, 7 * Pow10(k)}) {
        if (v >= Pow10(38) || v == 0) continue;
        col.AppendDecimal(v);
        col.AppendDecimal(-v);
      }
    }
    col.AppendDecimal(max38);
    col.AppendDecimal(-max38);
    col.AppendDecimal(0);
    ExpectRoundTrip(d, {0});
  }
}

TEST(CopyEncoderTest, NumericWireBytesMatchPostgres) {
  auto enc = [](DataType t, int128_t v) {
    Column c(t);
    c.AppendDecimal(v);
    std::string out;
    Status s = AppendPgValue(c, 0, &out);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  };
  // 12.30 as numeric(5,2): ndigits 2, weight 0, sign +, dscale 2, digits 12 and 3000.
  EXPECT_EQ(enc(DataType::Decimal(5, 2), 1230), Numeric(0, 0x0000, 2, {12, 3000}));
  // -0.0001 at scale 4: one digit 1 at weight -1, sign -.
  EXPECT_EQ(enc(DataType::Decimal(10, 4), -1), Numeric(-1, 0x4000, 4, {1}));
  // Zero: no digits, weight 0, sign +, dscale = the scale.
  EXPECT_EQ(enc(DataType::Decimal(5, 2), 0), Numeric(0, 0x0000, 2, {}));
  EXPECT_EQ(enc(DataType::Decimal(5, 2), 0), B16(0) + B16(0) + B16(0) + B16(2));
  // 100000000: trailing zero digits stripped (weight 2, digit 1).
  EXPECT_EQ(enc(DataType::Decimal(12, 0), Pow10(8)), Numeric(2, 0, 0, {1}));
  // 0.5 at scale 1 is the digit 5000 at weight -1; 0.000012 at scale 6 is 1200 at weight -2.
  EXPECT_EQ(enc(DataType::Decimal(3, 1), 5), Numeric(-1, 0, 1, {5000}));
  EXPECT_EQ(enc(DataType::Decimal(8, 6), 12), Numeric(-2, 0, 6, {1200}));
  // 123456789.0123: digits 1 2345 6789 . 0123, weight 2; an inner zero digit is kept.
  EXPECT_EQ(enc(DataType::Decimal(13, 4), 1234567890123LL), Numeric(2, 0, 4, {1, 2345, 6789, 123}));
  EXPECT_EQ(enc(DataType::Decimal(13, 0), 100000001), Numeric(2, 0, 0, {1, 0, 1}));
  // 38 nines, negative (the decoder's test bytes): 99 then nine 9999s, weight 9.
  std::vector<uint16_t> nines(10, 9999);
  nines[0] = 99;
  EXPECT_EQ(enc(DataType::Decimal(38, 0), -(Pow10(38) - 1)), Numeric(9, 0x4000, 0, nines));
}

TEST(CopyEncoderTest, RoundTripsDatesTimesAndTimestamps) {
  Batch b(SchemaOf(
      {DataType::Date(), DataType::Time(), DataType::Timestamp(), DataType::TimestampTz()}));
  // PostgreSQL's first and last dates (4714-11-24 BC is ISO year -4713).
  const int64_t pg_min_date = DaysFromCivil(-4713, 11, 24);
  const int64_t pg_max_date = DaysFromCivil(5874897, 12, 31);
  ASSERT_EQ(pg_min_date, -2440588);
  const int64_t pg_min_ts = pg_min_date * kMicrosPerDay;
  const std::vector<int32_t> dates = {0,
                                      -1,
                                      10957,  // 2000-01-01: PostgreSQL's 0
                                      static_cast<int32_t>(DaysFromCivil(1900, 1, 1)),
                                      static_cast<int32_t>(DaysFromCivil(-100, 3, 1)),  // 101 BC
                                      static_cast<int32_t>(pg_min_date),
                                      static_cast<int32_t>(pg_max_date),
                                      static_cast<int32_t>(DaysFromCivil(9999, 12, 31))};
  const std::vector<int64_t> times = {0, 1, 86399999999LL, 12 * 3600000000LL, 0, 5, 6, 7};
  const std::vector<int64_t> stamps = {0,
                                       -1,
                                       946684800000000LL,
                                       kI64Max,  // about year 294247
                                       pg_min_ts,
                                       pg_min_ts + 1,
                                       DaysFromCivil(1, 1, 1) * kMicrosPerDay - 1,
                                       DaysFromCivil(200000, 6, 1) * kMicrosPerDay + 123456};
  for (size_t r = 0; r < dates.size(); ++r) {
    b.column(0).AppendInt32(dates[r]);
    b.column(1).AppendInt64(times[r]);
    b.column(2).AppendInt64(stamps[r]);
    b.column(3).AppendInt64(stamps[stamps.size() - 1 - r]);
  }
  for (size_t c = 0; c < b.num_columns(); ++c) b.column(c).AppendNull();
  ExpectRoundTrip(b, All(b));

  // The epoch shift: 1970-01-01 is PostgreSQL's day -10957 and µs -946684800000000.
  std::string v;
  ASSERT_TRUE(AppendPgValue(b.column(0), 0, &v).ok());
  ASSERT_TRUE(AppendPgValue(b.column(2), 0, &v).ok());
  EXPECT_EQ(v, B32(uint32_t(-10957)) + B64(uint64_t(-946684800000000LL)));
  // 24:00:00 is a PostgreSQL time (the decoder refuses it, so no round trip).
  Column t(DataType::Time());
  t.AppendInt64(kMicrosPerDay);
  v.clear();
  ASSERT_TRUE(AppendPgValue(t, 0, &v).ok());
  EXPECT_EQ(v, B64(uint64_t(kMicrosPerDay)));
}

TEST(CopyEncoderTest, RoundTripsStringsAndBinaries) {
  Batch b(SchemaOf({DataType::String(), DataType::Binary()}));
  const std::vector<std::string> texts = {"", "a", "zoë 名 🚀", std::string(100000, 'x'), "tab\t\n"};
  const std::vector<std::string> bins = {"", std::string("\0\xff", 2), std::string(1, '\0'),
                                         std::string(70000, '\x80'), "plain"};
  for (size_t r = 0; r < texts.size(); ++r) {
    b.column(0).AppendBytes(texts[r]);
    b.column(1).AppendBytes(bins[r]);
  }
  b.column(0).AppendNull();
  b.column(1).AppendNull();
  ExpectRoundTrip(b, All(b));
  // An empty string is a zero-length value, not a NULL.
  const std::string stream = Encode(b, {0});
  EXPECT_EQ(stream.substr(19, 6), B16(1) + B32(0));
}

TEST(CopyEncoderTest, RoundTripsListsWithNullElementsEmptyAndNullLists) {
  Batch b(SchemaOf(
      {DataType::List(DataType::Int32(), false), DataType::List(DataType::String(), false),
       DataType::List(DataType::Decimal(10, 2), false), DataType::List(DataType::Date(), false),
       DataType::List(DataType::TimestampTz(), false), DataType::List(DataType::Uuid(), false),
       DataType::List(DataType::Boolean(), false), DataType::List(DataType::Binary(), false),
       DataType::List(DataType::Float64(), false)}));
  const uint8_t uuid[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  // Row 0: several elements with a NULL among them; row 1: empty; row 2: NULL; row 3: {NULL};
  // row 4: one element.
  auto fill = [&](size_t c, auto append_value) {
    Column& col = b.column(c);
    Column& e = col.list_child();
    append_value(e, 0);
    e.AppendNull();
    append_value(e, 1);
    col.AppendListEnd();
    col.AppendListEnd();
    col.AppendNull();
    e.AppendNull();
    col.AppendListEnd();
    append_value(e, 2);
    col.AppendListEnd();
  };
  fill(0, [](Column& e, int i) { e.AppendInt32(i == 1 ? kI32Min : i + 1); });
  fill(1, [](Column& e, int i) { e.AppendBytes(i == 0 ? "" : i == 1 ? "zoë" : "a"); });
  fill(2, [](Column& e, int i) { e.AppendDecimal(i == 1 ? -150 : i * 9999999); });
  fill(3, [](Column& e, int i) { e.AppendInt32(i == 1 ? -2440588 : -i); });
  fill(4, [](Column& e, int i) { e.AppendInt64(i == 1 ? kI64Max : -i); });
  fill(5, [&](Column& e, int) { e.AppendUuid(uuid); });
  fill(6, [](Column& e, int i) { e.AppendBool(i == 1); });
  fill(7, [](Column& e, int i) { e.AppendBytes(std::string(size_t(i), '\0')); });
  fill(8, [](Column& e, int i) { e.AppendDouble(i == 1 ? -0.0 : std::nan("")); });
  ExpectRoundTrip(b, All(b));

  // array_send's header: an empty list has no dimensions but names the element type; the
  // has-NULL flag is set only when an element is NULL.
  std::string v;
  ASSERT_TRUE(AppendPgValue(b.column(0), 1, &v).ok());
  EXPECT_EQ(v, B32(0) + B32(0) + B32(23));
  v.clear();
  ASSERT_TRUE(AppendPgValue(b.column(1), 0, &v).ok());
  EXPECT_EQ(
      v, B32(1) + B32(1) + B32(25) + B32(3) + B32(1) + B32(0) + B32(0xFFFFFFFF) + B32(4) + "zoë");
  v.clear();
  ASSERT_TRUE(AppendPgValue(b.column(0), 4, &v).ok());
  EXPECT_EQ(v, B32(1) + B32(0) + B32(23) + B32(1) + B32(1) + B32(4) + B32(3));
  v.clear();
  ASSERT_TRUE(AppendPgValue(b.column(2), 4, &v).ok());
  EXPECT_EQ(v, B32(1) + B32(0) + B32(1700) + B32(1) + B32(1) + B32(14) +
                   Numeric(1, 0, 2, {19, 9999, 9800}));
}

TEST(CopyEncoderTest, ColumnsAreChosenAndOrderedByTheCaller) {
  Batch b(SchemaOf({DataType::Int64(), DataType::String(), DataType::Boolean()}));
  for (int r = 0; r < 1000; ++r) {
    b.column(0).AppendInt64(r * 1000003LL);
    if (r % 7 == 0) {
      b.column(1).AppendNull();
    } else {
      b.column(1).AppendBytes(std::string(size_t(r % 13), char('a' + r % 26)));
    }
    b.column(2).AppendBool(r % 3 == 0);
  }
  ExpectRoundTrip(b, {2, 0});
  ExpectRoundTrip(b, {1, 1, 0, 2});
  // Tuple layout: field count, then the chosen columns in the chosen order.
  std::string stream = Encode(b, {2, 0});
  EXPECT_EQ(stream.substr(19, 2 + 5 + 12), B16(2) + B32(1) + "\x01" + B32(8) + B64(0));
  // No rows: nothing between header and trailer; an empty column list: field count 0 per row.
  Batch empty(SchemaOf({DataType::Int64()}));
  EXPECT_EQ(Encode(empty, {0}).size(), 21u);
  std::string none;
  ASSERT_TRUE(AppendCopyRows(b, {}, &none).ok());
  EXPECT_EQ(none, [] {
    std::string s;
    for (int i = 0; i < 1000; ++i) s += B16(0);
    return s;
  }());
}

TEST(CopyEncoderTest, RefusesValuesPostgresCannotHoldNamingColumnRowAndFix) {
  auto schema = std::make_shared<Schema>();
  schema->fields.push_back(Field{1, "id", DataType::Int32(), true, ""});
  schema->fields.push_back(Field{2, "note", DataType::String(), false, ""});
  Batch b(schema);
  b.column(0).AppendInt32(1);
  b.column(1).AppendBytes("fine");
  b.column(0).AppendInt32(2);
  b.column(1).AppendNull();
  b.column(0).AppendInt32(3);
  b.column(1).AppendBytes(std::string("bad\0byte", 8));
  std::string out = "kept";
  Status s = AppendCopyRows(b, {0, 1}, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("column note"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("row 3"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("NUL byte (at byte 3)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("bytea"), std::string::npos) << s.message();
  EXPECT_EQ(out, "kept");  // nothing of the batch is left behind
  // Without the bad column the batch encodes.
  EXPECT_TRUE(AppendCopyRows(b, {0}, &out).ok());

  struct Case {
    DataType type;
    std::function<void(Column&)> fill;
    const char* says;
  };
  std::vector<Case> cases = {
      {DataType::Date(), [](Column& c) { c.AppendInt32(-2440589); }, "4714-11-24 BC"},
      {DataType::Date(), [](Column& c) { c.AppendInt32(2145042906); }, "5874898-01-01"},
      {DataType::Date(), [](Column& c) { c.AppendInt32(kI32Max); }, "outside PostgreSQL's range"},
      {DataType::Date(), [](Column& c) { c.AppendInt32(kI32Min); },
       "date -5877641-06-23 is outside"},
      {DataType::Timestamp(), [](Column& c) { c.AppendInt64(-210866803200000001LL); },
       "-4713-11-23 23:59:59.999999 is before"},
      {DataType::TimestampTz(), [](Column& c) { c.AppendInt64(kI64Min); }, "is before"},
      {DataType::Time(), [](Column& c) { c.AppendInt64(kMicrosPerDay + 1); }, "time of day"},
      {DataType::Time(), [](Column& c) { c.AppendInt64(-1); }, "time of day"},
      {DataType::Decimal(5, 2), [](Column& c) { c.AppendDecimal(100000); },
       "decimal 1000.00 has more than 5 digits, which numeric(5,2)"},
      {DataType::Decimal(38, 0), [](Column& c) { c.AppendDecimal(-Pow10(38)); }, "more than 38"},
      {DataType::List(DataType::String(), false),
       [](Column& c) {
         c.list_child().AppendBytes("ok");
         c.list_child().AppendNull();
         c.list_child().AppendBytes(std::string(1, '\0'));
         c.AppendListEnd();
       },
       "array element 3: a string with a NUL byte"},
      {DataType::List(DataType::Date(), false),
       [](Column& c) {
         c.list_child().AppendInt32(kI32Max);
         c.AppendListEnd();
       },
       "array element 1: date"},
  };
  for (const auto& c : cases) {
    auto sch = std::make_shared<Schema>();
    sch->fields.push_back(Field{1, "ok", DataType::Int64(), true, ""});
    sch->fields.push_back(Field{2, "bad_col", c.type, false, ""});
    Batch batch(sch);
    batch.column(0).AppendInt64(7);
    batch.column(1).AppendNull();
    batch.column(0).AppendInt64(8);
    c.fill(batch.column(1));
    std::string o;
    Status st = AppendCopyRows(batch, {0, 1}, &o);
    ASSERT_FALSE(st.ok()) << c.says;
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(st.message().rfind("column bad_col, row 2 of the batch: ", 0), 0u) << st.message();
    EXPECT_NE(st.message().find(c.says), std::string::npos) << st.message();
    EXPECT_TRUE(o.empty());
    // One value: the same problem, without column and row.
    std::string single = "kept";
    Status sv = AppendPgValue(batch.column(1), 1, &single);
    ASSERT_FALSE(sv.ok());
    EXPECT_EQ(sv.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(sv.message().find(c.says), std::string::npos) << sv.message();
    EXPECT_EQ(single, "kept");
  }
}

TEST(CopyEncoderTest, RangeEdgesAreAccepted) {
  // The first and last values PostgreSQL takes encode; one beyond was refused above.
  Column d(DataType::Date());
  d.AppendInt32(-2440588);
  d.AppendInt32(2145042905);
  std::string v;
  ASSERT_TRUE(AppendPgValue(d, 0, &v).ok());
  ASSERT_TRUE(AppendPgValue(d, 1, &v).ok());
  // PostgreSQL's dates are Julian days 0 .. 2147483493 counted from 2000-01-01 (day 2451545).
  EXPECT_EQ(v, B32(uint32_t(-2451545)) + B32(2147483493u - 2451545u));
  Column t(DataType::Timestamp());
  t.AppendInt64(-210866803200000000LL);
  v.clear();
  ASSERT_TRUE(AppendPgValue(t, 0, &v).ok());
  EXPECT_EQ(v, B64(uint64_t(-211813488000000000LL)));  // PostgreSQL's MIN_TIMESTAMP
}

TEST(CopyEncoderTest, MisuseIsInternal) {
  Batch b(SchemaOf({DataType::Int32()}));
  b.column(0).AppendNull();
  std::string out;
  EXPECT_EQ(AppendCopyRows(b, {1}, &out).code(), StatusCode::kInternal);
  EXPECT_EQ(AppendPgValue(b.column(0), 0, &out).code(), StatusCode::kInternal);  // NULL
  EXPECT_EQ(AppendPgValue(b.column(0), 1, &out).code(), StatusCode::kInternal);  // no such row
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace ferry::sink::pg
