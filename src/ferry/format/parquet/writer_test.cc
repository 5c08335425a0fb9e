#include "ferry/format/parquet/writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ferry/format/parquet/encoding.h"
#include "ferry/format/parquet/parquet_test_util.h"

namespace ferry::parquet {
namespace {

using testing::Bytes;
using testing::LE;
using testing::TValue;

// An OutputStream that keeps the bytes and lets the test read them after the writer owns it.
class SharedStringStream final : public OutputStream {
 public:
  explicit SharedStringStream(std::string* out) : out_(out) {}
  Status Append(std::string_view data) override {
    if (closed_) return Status::Internal("append after close");
    out_->append(data);
    return Status::OK();
  }
  Status Close() override {
    closed_ = true;
    return Status::OK();
  }
  uint64_t Tell() const override { return out_->size(); }

 private:
  std::string* out_;
  bool closed_ = false;
};

std::shared_ptr<const Schema> MakeSchema(std::vector<Field> fields) {
  auto s = std::make_shared<Schema>();
  s->fields = std::move(fields);
  return s;
}

struct Written {
  std::string file;
  FileMetrics metrics;
  TValue footer;
};

Written WriteBatches(std::shared_ptr<const Schema> schema, const std::vector<const Batch*>& batches,
                     WriterOptions opts = {}) {
  Written w;
  auto writer = Writer::Open(std::make_unique<SharedStringStream>(&w.file), schema, opts);
  EXPECT_TRUE(writer.ok()) << writer.status().ToString();
  for (const Batch* b : batches) {
    Status st = (*writer)->Write(*b);
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
  auto m = (*writer)->Close();
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  w.metrics = *m;
  w.footer = testing::ReadFooter(w.file);
  return w;
}

Written WriteOne(std::shared_ptr<const Schema> schema, const Batch& batch,
                 WriterOptions opts = {}) {
  return WriteBatches(std::move(schema), {&batch}, opts);
}

// All values of column c across row groups, as plain bytes.
std::vector<std::optional<std::string>> ReadColumn(const Written& w, size_t c) {
  std::vector<std::optional<std::string>> out;
  for (size_t g = 0; g < w.footer[4].list.size(); ++g) {
    auto chunk = testing::ReadChunk(w.file, w.footer, g, c);
    out.insert(out.end(), chunk.values.begin(), chunk.values.end());
  }
  return out;
}

const TValue& ColumnMeta(const Written& w, size_t g, size_t c) {
  return w.footer[4].list[g][1].list[c][3];
}

std::string BE(__int128 v, int width) {
  std::string s(static_cast<size_t>(width), '\0');
  internal::BigEndianBytes(v, width, reinterpret_cast<uint8_t*>(s.data()));
  return s;
}

class WriterCodecTest : public ::testing::TestWithParam<Compression> {};

// Every type, with NULLs, read back by the test's own decoder.
TEST_P(WriterCodecTest, RoundTripsEveryType) {
  auto schema = MakeSchema({
      {1, "b", DataType::Boolean(), false},
      {2, "i", DataType::Int32(), false},
      {3, "l", DataType::Int64(), true},
      {4, "f", DataType::Float32(), false},
      {5, "d", DataType::Float64(), false},
      {6, "d9", DataType::Decimal(9, 2), false},
      {7, "d18", DataType::Decimal(18, 3), false},
      {8, "d38", DataType::Decimal(38, 5), false},
      {9, "dt", DataType::Date(), false},
      {10, "tm", DataType::Time(), false},
      {11, "ts", DataType::Timestamp(), false},
      {12, "tz", DataType::TimestampTz(), false},
      {13, "s", DataType::String(), false},
      {14, "bin", DataType::Binary(), false},
      {15, "u", DataType::Uuid(), false},
  });
  Batch batch(schema);
  const size_t n = 1000;
  std::vector<std::vector<std::optional<std::string>>> want(schema->fields.size());
  for (size_t r = 0; r < n; ++r) {
    bool null = r % 5 == 3;
    auto put = [&](size_t c, auto append, std::string plain) {
      if (null && !schema->fields[c].required) {
        batch.column(c).AppendNull();
        want[c].push_back(std::nullopt);
      } else {
        append();
        want[c].push_back(std::move(plain));
      }
    };
    auto ri = static_cast<int64_t>(r);
    put(
        0, [&] { batch.column(0).AppendBool(r % 3 == 0); },
        std::string(1, r % 3 == 0 ? '\1' : '\0'));
    put(
        1, [&] { batch.column(1).AppendInt32(static_cast<int32_t>(-ri * 3)); },
        LE(static_cast<int32_t>(-ri * 3)));
    put(
        2, [&] { batch.column(2).AppendInt64(ri << 40); }, LE(ri << 40));
    put(
        3, [&] { batch.column(3).AppendFloat(static_cast<float>(r) / 7); },
        LE(static_cast<float>(r) / 7));
    put(
        4, [&] { batch.column(4).AppendDouble(-static_cast<double>(r) / 3); },
        LE(-static_cast<double>(r) / 3));
    put(
        5, [&] { batch.column(5).AppendDecimal(ri - 500); }, LE(static_cast<int32_t>(ri - 500)));
    put(
        6, [&] { batch.column(6).AppendDecimal(ri * 1000000007); }, LE(ri * 1000000007));
    __int128 big =
        static_cast<__int128>(ri - 500) * static_cast<__int128>(1000000000000000000LL) * 1000;
    put(
        7, [&] { batch.column(7).AppendDecimal(big); }, BE(big, 16));
    put(
        8, [&] { batch.column(8).AppendInt32(static_cast<int32_t>(ri - 500)); },
        LE(static_cast<int32_t>(ri - 500)));
    put(
        9, [&] { batch.column(9).AppendInt64(ri * 1000); }, LE(ri * 1000));
    put(
        10, [&] { batch.column(10).AppendInt64(-ri); }, LE(-ri));
    put(
        11, [&] { batch.column(11).AppendInt64(ri); }, LE(ri));
    std::string s = r % 7 == 0 ? "" : "v\xC3\xA9" + std::to_string(r);
    put(
        12, [&] { batch.column(12).AppendBytes(s); }, s);
    std::string bin(r % 13, static_cast<char>(r));
    put(
        13, [&] { batch.column(13).AppendBytes(bin); }, bin);
    uint8_t u[16];
    for (int k = 0; k < 16; ++k) u[k] = static_cast<uint8_t>(r + static_cast<size_t>(k));
    put(
        14, [&] { batch.column(14).AppendUuid(u); }, std::string(reinterpret_cast<char*>(u), 16));
  }
  WriterOptions opts;
  opts.compression = GetParam();
  opts.page_bytes = 512;  // many pages per chunk
  Written w = WriteOne(schema, batch, opts);
  for (size_t c = 0; c < schema->fields.size(); ++c) {
    EXPECT_EQ(ReadColumn(w, c), want[c]) << "column " << schema->fields[c].name;
  }
  const int32_t codec = GetParam() == Compression::kZstd     ? 6
                        : GetParam() == Compression::kSnappy ? 1
                                                             : 0;
  EXPECT_EQ(ColumnMeta(w, 0, 0)[4].i, codec);
  EXPECT_EQ(w.metrics.file_size_bytes, w.file.size());
}

TEST(WriterTest, FooterSchemaCarriesFieldIdsAndLogicalTypes) {
  auto schema = MakeSchema({
      {10, "flag", DataType::Boolean(), true},
      {11, "d9", DataType::Decimal(9, 2), false},
      {12, "d38", DataType::Decimal(38, 10), false},
      {13, "d20", DataType::Decimal(20, 0), false},
      {14, "dt", DataType::Date(), false},
      {15, "tm", DataType::Time(), false},
      {16, "ts", DataType::Timestamp(), false},
      {17, "tz", DataType::TimestampTz(), false},
      {18, "s", DataType::String(), false},
      {19, "bin", DataType::Binary(), false},
      {20, "u", DataType::Uuid(), false},
  });
  Batch batch(schema);
  WriterOptions opts;
  opts.key_value_metadata = {{"iceberg.schema", "{}"}};
  Written w = WriteOne(schema, batch, opts);
  const TValue& f = w.footer;
  EXPECT_EQ(f[1].i, 2);  // version
  EXPECT_EQ(f[3].i, 0);  // num_rows
  EXPECT_TRUE(f[4].list.empty());
  EXPECT_EQ(f[6].bin, "ferry version 0.1.0");
  EXPECT_EQ(f[5].list[0][1].bin, "iceberg.schema");
  EXPECT_EQ(f[7].list.size(), 11u);  // column orders
  const auto& s = f[2].list;
  ASSERT_EQ(s.size(), 12u);
  EXPECT_EQ(s[0][4].bin, "table");
  EXPECT_EQ(s[0][5].i, 11);
  for (size_t c = 1; c < s.size(); ++c) {
    EXPECT_EQ(s[c][9].i, static_cast<int64_t>(9 + c)) << c;  // field_id
    EXPECT_EQ(s[c][4].bin, schema->fields[c - 1].name);
  }
  EXPECT_EQ(s[1][1].i, 0);  // BOOLEAN
  EXPECT_EQ(s[1][3].i, 0);  // REQUIRED
  EXPECT_EQ(s[2][3].i, 1);  // OPTIONAL
  // decimal(9,2): INT32, converted DECIMAL, scale/precision, LogicalType DECIMAL.
  EXPECT_EQ(s[2][1].i, 1);
  EXPECT_EQ(s[2][6].i, 5);
  EXPECT_EQ(s[2][7].i, 2);
  EXPECT_EQ(s[2][8].i, 9);
  EXPECT_EQ(s[2][10][5][1].i, 2);
  EXPECT_EQ(s[2][10][5][2].i, 9);
  // decimal(38,10): FLBA(16); decimal(20,0): FLBA(9).
  EXPECT_EQ(s[3][1].i, 7);
  EXPECT_EQ(s[3][2].i, 16);
  EXPECT_EQ(s[4][2].i, 9);
  // date: INT32 DATE.
  EXPECT_EQ(s[5][1].i, 1);
  EXPECT_EQ(s[5][6].i, 6);
  EXPECT_TRUE(s[5][10].has(6));
  // time: INT64 TIME(MICROS, not UTC), no converted type.
  EXPECT_EQ(s[6][1].i, 2);
  EXPECT_FALSE(s[6].has(6));
  EXPECT_FALSE(s[6][10][7][1].b);
  EXPECT_TRUE(s[6][10][7][2].has(2));
  // timestamp: not UTC, no converted type; timestamptz: UTC + TIMESTAMP_MICROS.
  EXPECT_FALSE(s[7][10][8][1].b);
  EXPECT_TRUE(s[7][10][8][2].has(2));
  EXPECT_FALSE(s[7].has(6));
  EXPECT_TRUE(s[8][10][8][1].b);
  EXPECT_EQ(s[8][6].i, 10);
  // string: BYTE_ARRAY + UTF8 + STRING; binary: BYTE_ARRAY alone; uuid: FLBA(16) + UUID.
  EXPECT_EQ(s[9][1].i, 6);
  EXPECT_EQ(s[9][6].i, 0);
  EXPECT_TRUE(s[9][10].has(1));
  EXPECT_EQ(s[10][1].i, 6);
  EXPECT_FALSE(s[10].has(6));
  EXPECT_FALSE(s[10].has(10));
  EXPECT_EQ(s[11][1].i, 7);
  EXPECT_EQ(s[11][2].i, 16);
  EXPECT_TRUE(s[11][10].has(14));
  // An empty file is still complete.
  EXPECT_EQ(w.metrics.record_count, 0u);
  EXPECT_EQ(w.metrics.file_size_bytes, w.file.size());
  EXPECT_TRUE(w.metrics.split_offsets.empty());
  EXPECT_EQ(w.metrics.columns[0].value_count, 0u);
  EXPECT_FALSE(w.metrics.columns[0].lower_bound.has_value());
}

// Offsets and sizes in the footer describe the bytes exactly.
TEST_P(WriterCodecTest, ChunkOffsetsAndSizesAreExact) {
  auto schema =
      MakeSchema({{1, "a", DataType::Int64(), false}, {2, "s", DataType::String(), true}});
  Batch batch(schema);
  std::mt19937_64 rng(1);
  for (int i = 0; i < 20000; ++i) {
    if (i % 3 == 0)
      batch.column(0).AppendNull();
    else
      batch.column(0).AppendInt64(static_cast<int64_t>(rng()));
    // Repeats within a chunk: every chunk keeps a dictionary (EncodingHints).
    batch.column(1).AppendBytes("value-" + std::to_string(rng() % 1000));
  }
  WriterOptions opts;
  opts.compression = GetParam();
  opts.page_bytes = 8 << 10;
  opts.row_group_bytes = 64 << 10;
  Written w = WriteOne(schema, batch, opts);
  const auto& groups = w.footer[4].list;
  ASSERT_GT(groups.size(), 1u);
  int64_t expected_offset = 4;  // after "PAR1"
  int64_t rows = 0;
  ASSERT_EQ(w.metrics.split_offsets.size(), groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    const TValue& rg = groups[g];
    EXPECT_EQ(rg[5].i, expected_offset) << "row group file_offset";
    EXPECT_EQ(w.metrics.split_offsets[g], expected_offset);
    EXPECT_EQ(rg[7].i, static_cast<int64_t>(g));  // ordinal
    int64_t total_uncompressed = 0, total_compressed = 0;
    for (size_t c = 0; c < 2; ++c) {
      const TValue& cc = rg[1].list[c];
      const TValue& md = cc[3];
      EXPECT_EQ(cc[2].i, expected_offset);   // ColumnChunk.file_offset
      EXPECT_EQ(md[11].i, expected_offset);  // dictionary_page_offset: the chunk starts with it
      EXPECT_EQ(md[5].i, rg[3].i);           // num_values = rows of the group (no nesting)
      auto chunk =
          testing::ReadChunk(w.file, w.footer, g, c);  // walks exactly total_compressed_size
      ASSERT_GT(chunk.pages.size(), 1u);
      EXPECT_EQ(chunk.pages[0].header[1].i, 2);  // DICTIONARY_PAGE
      // data_page_offset: right after the dictionary page.
      EXPECT_EQ(md[9].i, expected_offset + static_cast<int64_t>(chunk.pages[0].header_bytes) +
                             chunk.pages[0].header[3].i);
      int64_t unc = 0, comp = 0;
      for (const auto& p : chunk.pages) {
        unc += static_cast<int64_t>(p.header_bytes) + p.header[2].i;
        comp += static_cast<int64_t>(p.header_bytes) + p.header[3].i;
        if (p.header[1].i == 0) {
          EXPECT_LE(p.header[2].i, static_cast<int64_t>(opts.page_bytes) * 2);
        }
      }
      EXPECT_EQ(md[6].i, unc);
      EXPECT_EQ(md[7].i, comp);
      total_uncompressed += unc;
      total_compressed += comp;
      expected_offset += comp;
    }
    EXPECT_EQ(rg[2].i, total_uncompressed);  // total_byte_size
    EXPECT_EQ(rg[6].i, total_compressed);
    rows += rg[3].i;
  }
  EXPECT_EQ(rows, 20000);
  EXPECT_EQ(w.footer[3].i, 20000);
  // The footer starts right after the last chunk.
  uint32_t footer_len;
  std::memcpy(&footer_len, w.file.data() + w.file.size() - 8, 4);
  EXPECT_EQ(static_cast<size_t>(expected_offset) + footer_len + 8, w.file.size());
  // Metrics: compressed_bytes sums the chunks; value_count includes NULLs.
  int64_t col0 = 0;
  for (size_t g = 0; g < groups.size(); ++g) col0 += ColumnMeta(w, g, 0)[7].i;
  EXPECT_EQ(w.metrics.columns[0].compressed_bytes, static_cast<uint64_t>(col0));
  EXPECT_EQ(w.metrics.columns[0].value_count, 20000u);
  EXPECT_EQ(w.metrics.columns[0].null_count, 6667u);
  EXPECT_EQ(w.metrics.columns[1].null_count, 0u);
  EXPECT_EQ(w.metrics.record_count, 20000u);
  // Encodings: PLAIN (the dictionary page), RLE for the levels of optional columns, RLE_DICTIONARY.
  auto encodings = [&](size_t c) {
    std::vector<int64_t> e;
    for (const auto& v : ColumnMeta(w, 0, c)[2].list) e.push_back(v.i);
    return e;
  };
  EXPECT_EQ(encodings(0), (std::vector<int64_t>{0, 3, 8}));
  EXPECT_EQ(encodings(1), (std::vector<int64_t>{0, 8}));
}

TEST(WriterTest, PagesAreCutAtPageBytes) {
  auto schema =
      MakeSchema({{1, "a", DataType::Int64(), true}, {2, "b", DataType::Boolean(), true}});
  Batch batch(schema);
  for (int i = 0; i < 10000; ++i) {
    batch.column(0).AppendInt64(i);
    batch.column(1).AppendBool(i % 2 == 0);
  }
  WriterOptions opts;
  opts.compression = Compression::kUncompressed;
  opts.page_bytes = 8000;  // 1000 int64 values
  opts.dictionary = false;
  Written w = WriteOne(schema, batch, opts);
  auto chunk = testing::ReadChunk(w.file, w.footer, 0, 0);
  ASSERT_EQ(chunk.pages.size(), 10u);
  for (const auto& p : chunk.pages) EXPECT_EQ(p.header[5][1].i, 1000);
  EXPECT_FALSE(ColumnMeta(w, 0, 0).has(11));
  // With a dictionary, the open page budget counts 4 bytes per index: 2000 rows.
  opts.dictionary = true;
  Written d = WriteOne(schema, batch, opts);
  auto dchunk = testing::ReadChunk(d.file, d.footer, 0, 0);
  ASSERT_EQ(dchunk.pages.size(), 6u);  // dictionary page + 5 data pages
  EXPECT_EQ(dchunk.pages[0].header[7][1].i, 10000);
  for (size_t p = 1; p < dchunk.pages.size(); ++p) EXPECT_EQ(dchunk.pages[p].header[5][1].i, 2000);
  EXPECT_EQ(dchunk.values, chunk.values);
  auto bools = testing::ReadChunk(w.file, w.footer, 0, 1);
  EXPECT_EQ(bools.pages.size(), 1u);  // 10000 booleans bit-packed: 1250 bytes
  EXPECT_EQ(bools.values.size(), 10000u);
}

TEST(WriterTest, OneRowAtATimeMatchesOneBigBatch) {
  auto schema =
      MakeSchema({{1, "s", DataType::String(), false}, {2, "x", DataType::Float64(), false}});
  Batch big(schema);
  std::vector<std::unique_ptr<Batch>> singles;
  for (int i = 0; i < 3000; ++i) {
    auto one = std::make_unique<Batch>(schema);
    for (Batch* b : {&big, one.get()}) {
      if (i % 4 == 1)
        b->column(0).AppendNull();
      else
        b->column(0).AppendBytes(std::string(static_cast<size_t>(i % 50), 'q'));
      b->column(1).AppendDouble(i * 0.5);
    }
    singles.push_back(std::move(one));
  }
  std::vector<const Batch*> ptrs;
  for (const auto& b : singles) ptrs.push_back(b.get());
  WriterOptions opts;
  opts.compression = Compression::kUncompressed;
  opts.page_bytes = 4096;
  opts.row_group_bytes = 32 << 10;
  Written a = WriteOne(schema, big, opts);
  Written b = WriteBatches(schema, ptrs, opts);
  EXPECT_EQ(ReadColumn(a, 0), ReadColumn(b, 0));
  EXPECT_EQ(ReadColumn(a, 1), ReadColumn(b, 1));
  EXPECT_EQ(a.metrics.columns[0].lower_bound, b.metrics.columns[0].lower_bound);
  EXPECT_EQ(a.metrics.columns[0].upper_bound, b.metrics.columns[0].upper_bound);
  EXPECT_GT(b.footer[4].list.size(), 1u);
}

// Parquet statistics: signed ints, floats without NaN and with signed zeros, unsigned bytes.
TEST(WriterTest, ParquetStatisticsFollowTheSortOrders) {
  auto schema = MakeSchema({
      {1, "i", DataType::Int32(), false},
      {2, "f", DataType::Float64(), false},
      {3, "nan", DataType::Float32(), false},
      {4, "z", DataType::Float64(), false},
      {5, "s", DataType::String(), false},
      {6, "dec", DataType::Decimal(30, 2), false},
      {7, "u", DataType::Uuid(), false},
      {8, "none", DataType::Int64(), false},
  });
  Batch batch(schema);
  const int32_t ints[] = {5, -7, 3, std::numeric_limits<int32_t>::min() + 1, 100};
  const double dbl[] = {std::nan(""), 2.5, -1.25, std::nan(""), 0.5};
  const double zeros[] = {0.0, 0.0, 1.0, 2.0, 0.0};        // min is +0.0: written as -0.0
  const char* strs[] = {"b", "\xC3\xA9", "a", "ab", "Z"};  // unsigned: "Z" < "a" < "ab" < "b" < "é"
  const __int128 decs[] = {-5, 7, -300, 0, 299};
  for (int r = 0; r < 5; ++r) {
    batch.column(0).AppendInt32(ints[r]);
    batch.column(1).AppendDouble(dbl[r]);
    batch.column(2).AppendFloat(std::numeric_limits<float>::quiet_NaN());
    batch.column(3).AppendDouble(zeros[r]);
    batch.column(4).AppendBytes(strs[r]);
    batch.column(5).AppendDecimal(decs[r]);
    uint8_t u[16] = {};
    u[0] = static_cast<uint8_t>(r * 60);  // 0, 60, 120, 180, 240: unsigned order
    batch.column(6).AppendUuid(u);
    batch.column(7).AppendNull();
  }
  Written w = WriteOne(schema, batch);
  auto stats = [&](size_t c) { return ColumnMeta(w, 0, c)[12]; };
  EXPECT_EQ(stats(0)[6].bin, LE<int32_t>(std::numeric_limits<int32_t>::min() + 1));
  EXPECT_EQ(stats(0)[5].bin, LE<int32_t>(100));
  EXPECT_EQ(stats(0)[3].i, 0);
  EXPECT_EQ(stats(1)[6].bin, LE(-1.25));
  EXPECT_EQ(stats(1)[5].bin, LE(2.5));
  EXPECT_FALSE(stats(2).has(5));  // all NaN: no min/max
  EXPECT_FALSE(stats(2).has(6));
  EXPECT_EQ(stats(3)[6].bin, LE(-0.0));
  EXPECT_EQ(stats(3)[5].bin, LE(2.0));
  EXPECT_EQ(stats(4)[6].bin, "Z");
  EXPECT_EQ(stats(4)[5].bin, "\xC3\xA9");
  EXPECT_EQ(stats(5)[6].bin, BE(-300, 13));
  EXPECT_EQ(stats(5)[5].bin, BE(299, 13));
  EXPECT_EQ(static_cast<uint8_t>(stats(6)[6].bin[0]), 0);
  EXPECT_EQ(static_cast<uint8_t>(stats(6)[5].bin[0]), 240);
  EXPECT_EQ(stats(7)[3].i, 5);  // null_count
  EXPECT_FALSE(stats(7).has(5));
  EXPECT_TRUE(stats(0)[7].b);  // exact
}

// Iceberg metrics: single-value serialization, truncation, NaN and zero handling.
TEST(WriterTest, IcebergBoundsAndCounts) {
  auto schema = MakeSchema({
      {1, "i", DataType::Int32(), false},
      {2, "l", DataType::Int64(), false},
      {3, "f", DataType::Float32(), false},
      {4, "d", DataType::Float64(), false},
      {5, "s", DataType::String(), false},
      {6, "bin", DataType::Binary(), false},
      {7, "dec9", DataType::Decimal(9, 2), false},
      {8, "dec38", DataType::Decimal(38, 0), false},
      {9, "b", DataType::Boolean(), false},
      {10, "u", DataType::Uuid(), false},
      {11, "dt", DataType::Date(), false},
      {12, "ts", DataType::TimestampTz(), false},
      {13, "allnull", DataType::String(), false},
      {14, "zeros", DataType::Float64(), false},
      {15, "maxcp", DataType::String(), false},
  });
  Batch batch(schema);
  __int128 p38 = 1;
  for (int i = 0; i < 38; ++i) p38 *= 10;
  std::string long_e;  // 20 x "é"
  for (int i = 0; i < 20; ++i) long_e += "\xC3\xA9";
  std::string max_cps;  // 17 x U+10FFFF: no upper bound possible
  for (int i = 0; i < 17; ++i) max_cps += "\xF4\x8F\xBF\xBF";
  struct Row {
    int32_t i;
    int64_t l;
    float f;
    double d;
    std::string s, bin;
    __int128 d9, d38;
    bool b;
    uint8_t u0;
    int32_t dt;
    int64_t ts;
    double z;
  };
  const float fnan = std::numeric_limits<float>::quiet_NaN();
  const double dnan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<Row> rows = {
      {-5, std::numeric_limits<int64_t>::min(), fnan, -inf, long_e, std::string(20, '\x01'),
       -999999999, -(p38 - 1), true, 9, -719162, -1, -0.0},
      {7, std::numeric_limits<int64_t>::max(), 1.5f, dnan, "abc", std::string(20, '\xFF'), 12345,
       p38 - 1, true, 3, 0, 0, 0.0},
      {0, 0, -2.5f, 3.0, "ab", "", 0, 0, true, 200, 10, 5, -0.0},
  };
  for (const auto& r : rows) {
    batch.column(0).AppendInt32(r.i);
    batch.column(1).AppendInt64(r.l);
    batch.column(2).AppendFloat(r.f);
    batch.column(3).AppendDouble(r.d);
    batch.column(4).AppendBytes(r.s);
    batch.column(5).AppendBytes(r.bin);
    batch.column(6).AppendDecimal(r.d9);
    batch.column(7).AppendDecimal(r.d38);
    batch.column(8).AppendBool(r.b);
    uint8_t u[16] = {};
    u[0] = r.u0;
    batch.column(9).AppendUuid(u);
    batch.column(10).AppendInt32(r.dt);
    batch.column(11).AppendInt64(r.ts);
    batch.column(12).AppendNull();
    batch.column(13).AppendDouble(r.z);
    batch.column(14).AppendBytes(max_cps);
  }
  // A NULL row and a NaN row more for the float columns.
  for (size_t c = 0; c < schema->fields.size(); ++c) batch.column(c).AppendNull();
  Written w = WriteOne(schema, batch);
  const auto& m = w.metrics.columns;
  ASSERT_EQ(m.size(), 15u);
  for (size_t c = 0; c < m.size(); ++c) {
    EXPECT_EQ(m[c].field_id, static_cast<int32_t>(c + 1));
    EXPECT_EQ(m[c].value_count, 4u) << c;
    EXPECT_GT(m[c].compressed_bytes, 0u);
  }
  EXPECT_EQ(m[0].null_count, 1u);
  EXPECT_EQ(m[12].null_count, 4u);
  EXPECT_EQ(m[0].lower_bound, LE<int32_t>(-5));
  EXPECT_EQ(m[0].upper_bound, LE<int32_t>(7));
  EXPECT_FALSE(m[0].nan_count.has_value());
  EXPECT_EQ(m[1].lower_bound, LE(std::numeric_limits<int64_t>::min()));
  EXPECT_EQ(m[1].upper_bound, LE(std::numeric_limits<int64_t>::max()));
  EXPECT_EQ(m[2].nan_count, 1u);
  EXPECT_EQ(m[2].lower_bound, LE(-2.5f));
  EXPECT_EQ(m[2].upper_bound, LE(1.5f));
  EXPECT_EQ(m[3].nan_count, 1u);
  EXPECT_EQ(m[3].lower_bound, LE(-inf));
  EXPECT_EQ(m[3].upper_bound, LE(3.0));
  // Strings: 16 code points; upper bound's last code point incremented (é -> ê).
  std::string lower16, upper16;
  for (int i = 0; i < 16; ++i) lower16 += "\xC3\xA9";
  for (int i = 0; i < 15; ++i) upper16 += "\xC3\xA9";
  upper16 += "\xC3\xAA";
  EXPECT_EQ(m[4].lower_bound, "ab");  // min is short: kept whole
  EXPECT_EQ(m[4].upper_bound, upper16);
  EXPECT_NE(m[4].upper_bound, lower16);
  EXPECT_EQ(m[5].lower_bound, "");
  EXPECT_EQ(m[5].upper_bound, std::nullopt);  // 0xFF x 20 cannot be incremented within 16 bytes
  EXPECT_EQ(m[6].lower_bound, Bytes({0xC4, 0x65, 0x36, 0x01}));  // -999999999
  EXPECT_EQ(m[6].upper_bound, Bytes({0x30, 0x39}));              // 12345
  EXPECT_EQ(m[7].lower_bound, internal::MinimalBigEndian(-(p38 - 1)));
  EXPECT_EQ(m[7].upper_bound->size(), 16u);
  EXPECT_EQ(m[8].lower_bound, Bytes({0x01}));  // only true
  EXPECT_EQ(m[8].upper_bound, Bytes({0x01}));
  EXPECT_EQ(static_cast<uint8_t>((*m[9].lower_bound)[0]), 3);
  EXPECT_EQ(static_cast<uint8_t>((*m[9].upper_bound)[0]), 200);
  EXPECT_EQ(m[9].lower_bound->size(), 16u);
  EXPECT_EQ(m[10].lower_bound, LE<int32_t>(-719162));
  EXPECT_EQ(m[11].lower_bound, LE<int64_t>(-1));
  EXPECT_EQ(m[11].upper_bound, LE<int64_t>(5));
  EXPECT_FALSE(m[12].lower_bound.has_value());  // all NULL: no bounds
  EXPECT_FALSE(m[12].upper_bound.has_value());
  // -0.0 sorts before +0.0: lower -0.0, upper +0.0.
  EXPECT_EQ(m[13].lower_bound, LE(-0.0));
  EXPECT_EQ(m[13].upper_bound, LE(0.0));
  EXPECT_EQ(m[14].lower_bound->size(), 64u);
  EXPECT_FALSE(m[14].upper_bound.has_value());
}

TEST(WriterTest, OnlyNegativeZeroGivesNegativeZeroUpperBound) {
  auto schema =
      MakeSchema({{1, "z", DataType::Float32(), true}, {2, "n", DataType::Float64(), true}});
  Batch batch(schema);
  batch.column(0).AppendFloat(-0.0f);
  batch.column(1).AppendDouble(std::numeric_limits<double>::quiet_NaN());
  Written w = WriteOne(schema, batch);
  EXPECT_EQ(w.metrics.columns[0].lower_bound, LE(-0.0f));
  EXPECT_EQ(w.metrics.columns[0].upper_bound, LE(-0.0f));
  EXPECT_EQ(w.metrics.columns[0].nan_count, 0u);
  // Parquet stats still follow the spec's rule: max zero written as +0.0.
  EXPECT_EQ(ColumnMeta(w, 0, 0)[12][5].bin, LE(0.0f));
  EXPECT_FALSE(w.metrics.columns[1].lower_bound.has_value());  // NaN is never a bound
  EXPECT_EQ(w.metrics.columns[1].nan_count, 1u);
}

TEST(WriterTest, BoundsSpanRowGroups) {
  auto schema = MakeSchema({{1, "v", DataType::Int64(), true}, {2, "s", DataType::String(), true}});
  Batch batch(schema);
  int64_t want_lo = std::numeric_limits<int64_t>::max(),
          want_hi = std::numeric_limits<int64_t>::min();
  std::string want_slo, want_shi;
  for (int64_t i = 0; i < 50000; ++i) {
    int64_t v = (i * 7919) % 100001 - 50000;
    batch.column(0).AppendInt64(v);
    std::string s = "k" + std::to_string(v + 50000);
    batch.column(1).AppendBytes(s);
    want_lo = std::min(want_lo, v);
    want_hi = std::max(want_hi, v);
    if (i == 0 || s < want_slo) want_slo = s;
    if (i == 0 || s > want_shi) want_shi = s;
  }
  WriterOptions opts;
  opts.row_group_bytes = 64 << 10;
  opts.page_bytes = 8 << 10;
  Written w = WriteOne(schema, batch, opts);
  ASSERT_GT(w.footer[4].list.size(), 3u);
  EXPECT_EQ(w.metrics.columns[0].lower_bound, LE<int64_t>(want_lo));
  EXPECT_EQ(w.metrics.columns[0].upper_bound, LE<int64_t>(want_hi));
  EXPECT_EQ(w.metrics.columns[1].lower_bound, want_slo);
  EXPECT_EQ(w.metrics.columns[1].upper_bound, want_shi);
  // Each row group's statistics cover its own rows only.
  int64_t lo = std::numeric_limits<int64_t>::max();
  for (size_t g = 0; g < w.footer[4].list.size(); ++g) {
    int64_t mn;
    std::memcpy(&mn, ColumnMeta(w, g, 0)[12][6].bin.data(), 8);
    lo = std::min(lo, mn);
  }
  EXPECT_EQ(lo, want_lo);
}

TEST(WriterTest, LargeStringsStayOutOfParquetStatistics) {
  auto schema = MakeSchema({{1, "s", DataType::String(), true}});
  Batch batch(schema);
  batch.column(0).AppendBytes("a");
  batch.column(0).AppendBytes(std::string(10000, 'z'));
  Written w = WriteOne(schema, batch);
  EXPECT_FALSE(ColumnMeta(w, 0, 0)[12].has(5));
  EXPECT_EQ(w.metrics.columns[0].lower_bound, "a");
  EXPECT_EQ(w.metrics.columns[0].upper_bound, std::string(15, 'z') + "{");
  uint32_t footer_len;
  std::memcpy(&footer_len, w.file.data() + w.file.size() - 8, 4);
  EXPECT_LT(footer_len, 1000u);
}

// Feeding many batches keeps the writer's buffers bounded by the row group size.
TEST(WriterTest, MemoryStaysBoundedWhateverTheRowCount) {
  auto schema = MakeSchema({{1, "id", DataType::Int64(), true},
                            {2, "x", DataType::Float64(), false},
                            {3, "s", DataType::String(), false}});
  std::string file;
  WriterOptions opts;
  opts.row_group_bytes = 1 << 20;
  opts.page_bytes = 64 << 10;
  opts.dictionary_page_bytes = 128 << 10;  // these columns fall back in every row group
  auto w = Writer::Open(std::make_unique<SharedStringStream>(&file), schema, opts);
  ASSERT_TRUE(w.ok());
  Batch batch(schema);
  std::mt19937_64 rng(7);
  uint64_t peak_first_half = 0, peak = 0;
  const int kBatches = 200;
  for (int b = 0; b < kBatches; ++b) {
    batch.Clear();
    for (int i = 0; i < 5000; ++i) {
      batch.column(0).AppendInt64(static_cast<int64_t>(rng()));
      batch.column(1).AppendDouble(static_cast<double>(rng() % 1000000) / 7);
      batch.column(2).AppendBytes(std::to_string(rng()));
    }
    ASSERT_TRUE((*w)->Write(batch).ok());
    uint64_t mem = (*w)->BufferedMemoryBytes();
    peak = std::max(peak, mem);
    if (b < kBatches / 2) peak_first_half = peak;
    // Never more than about a row group plus a page and a dictionary per column (and buffer
    // growth slack; a dictionary's hash table can take 4x its PLAIN size).
    ASSERT_LT(mem,
              3 * opts.row_group_bytes + 6 * opts.page_bytes + 3 * 6 * opts.dictionary_page_bytes)
        << "batch " << b;
    EXPECT_LE((*w)->EstimatedSize(), file.size() + opts.row_group_bytes + 3 * opts.page_bytes +
                                         3 * opts.dictionary_page_bytes + 4096);
  }
  EXPECT_LE(peak, peak_first_half * 5 / 4) << "buffers keep growing with the rows written";
  auto m = (*w)->Close();
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->record_count, 1000000u);
  EXPECT_EQ(m->file_size_bytes, file.size());
  EXPECT_GT(m->split_offsets.size(), 5u);
  // Row groups are near the target, not tiny.
  TValue footer = testing::ReadFooter(file);
  for (size_t g = 0; g + 1 < footer[4].list.size(); ++g) {
    EXPECT_GT(footer[4].list[g][6].i, static_cast<int64_t>(opts.row_group_bytes / 2));
  }
}

TEST(WriterTest, RejectsBadInput) {
  auto schema = MakeSchema({{1, "id", DataType::Int64(), true}});
  std::string file;
  auto w = Writer::Open(std::make_unique<SharedStringStream>(&file), schema);
  ASSERT_TRUE(w.ok());
  Batch with_null(schema);
  with_null.column(0).AppendNull();
  Status st = (*w)->Write(with_null);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'id'"), std::string::npos);
  auto other = MakeSchema({{1, "id", DataType::Int32(), true}});
  Batch wrong(other);
  EXPECT_EQ((*w)->Write(wrong).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE((*w)->Close().ok());
  Batch ok(schema);
  ok.column(0).AppendInt64(1);
  EXPECT_FALSE((*w)->Write(ok).ok());
  EXPECT_FALSE((*w)->Close().ok());

  WriterOptions bad;
  bad.zstd_level = 1000;
  std::string f2;
  EXPECT_EQ(Writer::Open(std::make_unique<SharedStringStream>(&f2), schema, bad).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(*ParseCompression("zstd"), Compression::kZstd);
  EXPECT_EQ(*ParseCompression("snappy"), Compression::kSnappy);
  EXPECT_EQ(*ParseCompression("none"), Compression::kUncompressed);
  EXPECT_EQ(ParseCompression("lz4").status().code(), StatusCode::kInvalidArgument);
}

TEST(WriterTest, RowsWrittenAndEstimatedSize) {
  auto schema = MakeSchema({{1, "id", DataType::Int64(), true}});
  std::string file;
  auto w = Writer::Open(std::make_unique<SharedStringStream>(&file), schema);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ((*w)->EstimatedSize(), 4u);
  Batch b(schema);
  for (int i = 0; i < 1000; ++i) b.column(0).AppendInt64(i);
  ASSERT_TRUE((*w)->Write(b).ok());
  EXPECT_EQ((*w)->rows_written(), 1000u);
  EXPECT_GE((*w)->EstimatedSize(), 8000u);
  auto m = (*w)->Close();
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->file_size_bytes, file.size());
}

// The estimate counts open pages at the compression the column got so far: a file of
// compressible values closed at an estimated size is near it, though most of it was in open,
// uncompressed pages a moment before.
TEST(WriterTest, EstimatedSizeFollowsTheCompression) {
  auto schema = MakeSchema({{1, "note", DataType::String(), true}});
  std::string file;
  WriterOptions opts;
  opts.dictionary = false;
  opts.page_bytes = 256 << 10;
  auto w = Writer::Open(std::make_unique<SharedStringStream>(&file), schema, opts);
  ASSERT_TRUE(w.ok());
  Batch b(schema);
  for (int i = 0; i < 60000; ++i) b.column(0).AppendBytes("order " + std::to_string(i % 977));
  ASSERT_TRUE((*w)->Write(b).ok());
  const uint64_t estimate = (*w)->EstimatedSize();
  auto m = (*w)->Close();
  ASSERT_TRUE(m.ok());
  EXPECT_GT(estimate, m->file_size_bytes * 7 / 10) << m->file_size_bytes;
  EXPECT_LT(estimate, m->file_size_bytes * 2) << m->file_size_bytes;
}

// Page encodings of a chunk, in file order: "D" dictionary page, "R" RLE_DICTIONARY data page,
// "P" PLAIN data page.
std::string PageKinds(const Written& w, size_t g, size_t c) {
  std::string k;
  for (const auto& p : testing::ReadChunk(w.file, w.footer, g, c).pages) {
    if (p.header[1].i == 2)
      k += 'D';
    else
      k += p.header[5][2].i == 8 ? 'R' : 'P';
  }
  return k;
}
// "D" -> count, "R" -> count, "P" -> count from the chunk's encoding_stats.
std::map<std::string, int64_t> EncodingStats(const Written& w, size_t g, size_t c) {
  std::map<std::string, int64_t> m;
  for (const auto& e : ColumnMeta(w, g, c)[13].list) {
    std::string k = e[1].i == 2 ? "D" : e[2].i == 8 ? "R" : "P";
    EXPECT_TRUE(e[1].i == 2 ? e[2].i == 0 : (e[2].i == 8 || e[2].i == 0));
    m[k] += e[3].i;
  }
  return m;
}
std::map<std::string, int64_t> CountKinds(const std::string& kinds) {
  std::map<std::string, int64_t> m;
  for (char ch : kinds) m[std::string(1, ch)]++;
  return m;
}

// A low-cardinality chunk: one PLAIN dictionary page of the distinct values in first-seen order,
// then RLE_DICTIONARY data pages; exact statistics; footer offsets, encodings, encoding_stats.
TEST_P(WriterCodecTest, DictionaryPageStructure) {
  auto schema = MakeSchema({{1, "status", DataType::String(), true},
                            {2, "qty", DataType::Int32(), false},
                            {3, "flag", DataType::Boolean(), true}});
  Batch batch(schema);
  const char* words[] = {"pending", "paid", "shipped", "delivered", "cancelled"};
  std::vector<std::optional<std::string>> want_s, want_q;
  for (int i = 0; i < 50000; ++i) {
    const char* word = words[(i * 7 / 3) % 5];
    batch.column(0).AppendBytes(word);
    want_s.emplace_back(word);
    if (i % 11 == 0) {
      batch.column(1).AppendNull();
      want_q.emplace_back(std::nullopt);
    } else {
      int32_t q = (i * 37) % 100 - 50;
      batch.column(1).AppendInt32(q);
      want_q.emplace_back(LE(q));
    }
    batch.column(2).AppendBool(i % 3 == 0);
  }
  WriterOptions opts;
  opts.compression = GetParam();
  opts.page_bytes = 16 << 10;
  Written w = WriteOne(schema, batch, opts);
  ASSERT_EQ(w.footer[4].list.size(), 1u);
  EXPECT_EQ(ReadColumn(w, 0), want_s);
  EXPECT_EQ(ReadColumn(w, 1), want_q);
  for (size_t c = 0; c < 2; ++c) {
    auto chunk = testing::ReadChunk(w.file, w.footer, 0, c);
    const TValue& md = ColumnMeta(w, 0, c);
    ASSERT_GT(chunk.pages.size(), 3u);
    const TValue& dict = chunk.pages[0].header;
    EXPECT_EQ(dict[1].i, 2);                    // DICTIONARY_PAGE
    EXPECT_EQ(dict[7][2].i, 0);                 // PLAIN
    EXPECT_EQ(dict[7][1].i, c == 0 ? 5 : 100);  // distinct values
    EXPECT_EQ(md[11].i, w.footer[4].list[0][1].list[c][2].i);
    EXPECT_GT(md[9].i, md[11].i);
    std::string kinds = PageKinds(w, 0, c);
    EXPECT_EQ(kinds, "D" + std::string(kinds.size() - 1, 'R')) << c;
    EXPECT_EQ(EncodingStats(w, 0, c), CountKinds(kinds));
  }
  EXPECT_EQ(ColumnMeta(w, 0, 0)[12][6].bin, "cancelled");
  EXPECT_EQ(ColumnMeta(w, 0, 0)[12][5].bin, "shipped");
  EXPECT_EQ(ColumnMeta(w, 0, 1)[12][6].bin, LE<int32_t>(-50));
  EXPECT_EQ(ColumnMeta(w, 0, 1)[12][5].bin, LE<int32_t>(49));
  EXPECT_EQ(ColumnMeta(w, 0, 1)[12][3].i, 4546);  // null_count
  EXPECT_EQ(w.metrics.columns[0].lower_bound, "cancelled");
  EXPECT_EQ(w.metrics.columns[0].upper_bound, "shipped");
  EXPECT_EQ(w.metrics.columns[1].lower_bound, LE<int32_t>(-50));
  EXPECT_EQ(w.metrics.columns[1].upper_bound, LE<int32_t>(49));
  EXPECT_EQ(w.metrics.columns[1].null_count, 4546u);
  // Booleans never get a dictionary.
  EXPECT_EQ(PageKinds(w, 0, 2), "P");
  EXPECT_FALSE(ColumnMeta(w, 0, 2).has(11));
  // Far smaller than PLAIN.
  opts.dictionary = false;
  Written plain = WriteOne(schema, batch, opts);
  EXPECT_EQ(ReadColumn(plain, 0), want_s);
  EXPECT_EQ(PageKinds(plain, 0, 0).find_first_not_of('P'), std::string::npos);
  EXPECT_EQ(ColumnMeta(plain, 0, 0)[2].list.size(), 1u);  // PLAIN only
  if (GetParam() == Compression::kUncompressed) {
    EXPECT_LT(ColumnMeta(w, 0, 0)[7].i * 5, ColumnMeta(plain, 0, 0)[7].i);
  }
}

// Every dictionary-eligible type, low and high cardinality, with NULLs, with and without
// dictionaries: same values, same statistics and Iceberg metrics.
TEST_P(WriterCodecTest, DictionaryEveryTypeMatchesPlain) {
  auto schema = MakeSchema({
      {1, "i", DataType::Int32(), false},
      {2, "l", DataType::Int64(), false},
      {3, "f", DataType::Float32(), false},
      {4, "d", DataType::Float64(), false},
      {5, "d9", DataType::Decimal(9, 2), false},
      {6, "d18", DataType::Decimal(18, 3), false},
      {7, "d38", DataType::Decimal(38, 5), false},
      {8, "d20", DataType::Decimal(20, 0), false},
      {9, "dt", DataType::Date(), false},
      {10, "tm", DataType::Time(), false},
      {11, "ts", DataType::Timestamp(), false},
      {12, "tz", DataType::TimestampTz(), false},
      {13, "s", DataType::String(), false},
      {14, "bin", DataType::Binary(), false},
      {15, "u", DataType::Uuid(), false},
      {16, "b", DataType::Boolean(), false},
  });
  for (int64_t card : {int64_t{7}, int64_t{100000}}) {
    Batch batch(schema);
    const double fz[] = {
        0.0, -0.0, std::nan(""), 1.5, -2.25, std::numeric_limits<double>::infinity(), 3.0};
    for (int64_t r = 0; r < 6000; ++r) {
      const int64_t x = (r * 7919) % card;
      if (r % 9 == 4) {
        for (size_t c = 0; c < schema->fields.size(); ++c) batch.column(c).AppendNull();
        continue;
      }
      batch.column(0).AppendInt32(static_cast<int32_t>(x - 3));
      batch.column(1).AppendInt64((x - 3) << 40);
      batch.column(2).AppendFloat(
          static_cast<float>(card == 7 ? fz[x] : static_cast<double>(x) / 7));
      batch.column(3).AppendDouble(card == 7 ? fz[x] : -static_cast<double>(x) / 3);
      batch.column(4).AppendDecimal(x - 3);
      batch.column(5).AppendDecimal((x - 3) * 1000000007);
      batch.column(6).AppendDecimal(static_cast<__int128>(x - 3) * 1000000000000000000LL * 1000);
      batch.column(7).AppendDecimal(static_cast<__int128>(3 - x) * 1000000000000000000LL);
      batch.column(8).AppendInt32(static_cast<int32_t>(x));
      batch.column(9).AppendInt64(x * 1000);
      batch.column(10).AppendInt64(-x);
      batch.column(11).AppendInt64(x);
      batch.column(12).AppendBytes(x % 5 == 0 ? std::string() : "v\xC3\xA9" + std::to_string(x));
      batch.column(13).AppendBytes(std::string(static_cast<size_t>(x % 13), static_cast<char>(x)));
      uint8_t u[16];
      for (int k = 0; k < 16; ++k) u[k] = static_cast<uint8_t>(x * 3 + k);
      batch.column(14).AppendUuid(u);
      batch.column(15).AppendBool(x % 2 == 0);
    }
    WriterOptions opts;
    opts.compression = GetParam();
    opts.page_bytes = 2048;
    Written dict = WriteOne(schema, batch, opts);
    opts.dictionary = false;
    Written plain = WriteOne(schema, batch, opts);
    for (size_t c = 0; c < schema->fields.size(); ++c) {
      const std::string& name = schema->fields[c].name;
      EXPECT_EQ(ReadColumn(dict, c), ReadColumn(plain, c)) << name << " card " << card;
      std::string kinds = PageKinds(dict, 0, c);
      if (name == "b") {
        EXPECT_EQ(kinds.find_first_not_of('P'), std::string::npos) << name;
      } else {
        EXPECT_EQ(kinds[0], 'D') << name;
        EXPECT_EQ(kinds.find('P'), std::string::npos)
            << name << " " << card;  // no fallback at 1 MiB
      }
      EXPECT_EQ(PageKinds(plain, 0, c).find_first_not_of('P'), std::string::npos) << name;
      const TValue& sd = ColumnMeta(dict, 0, c)[12];
      const TValue& sp = ColumnMeta(plain, 0, c)[12];
      EXPECT_EQ(sd[3].i, sp[3].i) << name;
      EXPECT_EQ(sd.has(5), sp.has(5)) << name;
      if (sd.has(5) && sp.has(5)) {
        EXPECT_EQ(sd[5].bin, sp[5].bin) << name;
        EXPECT_EQ(sd[6].bin, sp[6].bin) << name;
      }
      const ColumnMetrics& md = dict.metrics.columns[c];
      const ColumnMetrics& mp = plain.metrics.columns[c];
      EXPECT_EQ(md.value_count, mp.value_count) << name;
      EXPECT_EQ(md.null_count, mp.null_count) << name;
      EXPECT_EQ(md.nan_count, mp.nan_count) << name;
      EXPECT_EQ(md.lower_bound, mp.lower_bound) << name;
      EXPECT_EQ(md.upper_bound, mp.upper_bound) << name;
      if (card == 7 && name != "b") {
        EXPECT_LT(md.compressed_bytes, mp.compressed_bytes) << name;
      }
    }
    if (card == 7) {
      EXPECT_EQ(dict.metrics.columns[3].nan_count, plain.metrics.columns[3].nan_count);
      EXPECT_GT(*dict.metrics.columns[3].nan_count, 100u);
      EXPECT_EQ(testing::ReadChunk(dict.file, dict.footer, 0, 3).pages[0].header[7][1].i, 7);
    }
  }
}

// The dictionary outgrows dictionary_page_bytes mid-chunk: the pages written so far stay
// RLE_DICTIONARY, the dictionary page holds what it had, the rest of the chunk is PLAIN; the
// next row group starts a new dictionary.
TEST_P(WriterCodecTest, DictionaryFallsBackMidChunk) {
  auto schema =
      MakeSchema({{1, "v", DataType::Int64(), false}, {2, "s", DataType::String(), false}});
  Batch batch(schema);
  std::vector<std::optional<std::string>> want_v, want_s;
  const int64_t rows = 20000;
  for (int64_t i = 0; i < rows; ++i) {
    // 10 values for the first 3000 rows, then every value new.
    const int64_t v = i < 3000 ? (i % 10) * 1000 : i * 3 - 100000;
    if (i % 13 == 5) {
      batch.column(0).AppendNull();
      batch.column(1).AppendNull();
      want_v.emplace_back(std::nullopt);
      want_s.emplace_back(std::nullopt);
      continue;
    }
    batch.column(0).AppendInt64(v);
    want_v.emplace_back(LE(v));
    std::string s = "key-" + std::to_string(v);
    batch.column(1).AppendBytes(s);
    want_s.emplace_back(s);
  }
  WriterOptions opts;
  opts.compression = GetParam();
  opts.page_bytes = 4096;
  opts.dictionary_page_bytes = 8000;  // 1000 int64 entries
  Written w = WriteOne(schema, batch, opts);
  ASSERT_EQ(w.footer[4].list.size(), 1u);
  EXPECT_EQ(ReadColumn(w, 0), want_v);
  EXPECT_EQ(ReadColumn(w, 1), want_s);
  for (size_t c = 0; c < 2; ++c) {
    std::string kinds = PageKinds(w, 0, c);
    // D R...R P...P
    ASSERT_EQ(kinds[0], 'D');
    size_t first_plain = kinds.find('P');
    ASSERT_NE(first_plain, std::string::npos) << kinds;
    EXPECT_GT(first_plain, 1u) << kinds;
    EXPECT_EQ(kinds.find_first_not_of('R', 1), first_plain) << kinds;
    EXPECT_EQ(kinds.find_first_not_of('P', first_plain), std::string::npos) << kinds;
    EXPECT_EQ(EncodingStats(w, 0, c), CountKinds(kinds));
    std::vector<int64_t> enc;
    for (const auto& e : ColumnMeta(w, 0, c)[2].list) enc.push_back(e.i);
    EXPECT_EQ(enc, (std::vector<int64_t>{0, 3, 8}));
    auto chunk = testing::ReadChunk(w.file, w.footer, 0, c);
    EXPECT_LE(chunk.pages[0].header[2].i, 8000);
  }
  EXPECT_EQ(testing::ReadChunk(w.file, w.footer, 0, 0).pages[0].header[7][1].i, 1000);
  // Statistics cover both parts: the min from the PLAIN pages, the max from the dictionary.
  EXPECT_EQ(ColumnMeta(w, 0, 0)[12][6].bin, LE<int64_t>(-91000));
  EXPECT_EQ(ColumnMeta(w, 0, 0)[12][5].bin, LE<int64_t>(9000));
  EXPECT_EQ(w.metrics.columns[0].lower_bound, LE<int64_t>(-91000));
  EXPECT_EQ(w.metrics.columns[0].upper_bound, LE<int64_t>(9000));
  std::string smin = "~", smax;
  for (const auto& v : want_s) {
    if (v && *v < smin) smin = *v;
    if (v && *v > smax) smax = *v;
  }
  EXPECT_EQ(ColumnMeta(w, 0, 1)[12][6].bin, smin);
  EXPECT_EQ(ColumnMeta(w, 0, 1)[12][5].bin, smax);
  EXPECT_EQ(w.metrics.columns[1].lower_bound, smin);
  EXPECT_EQ(w.metrics.columns[1].upper_bound, smax);

  // Several row groups: a chunk that fell back is followed by two PLAIN chunks, then a chunk
  // tries a new dictionary again and falls back on its own (these values stay distinct), and
  // the PLAIN runs between tries double: 2, 4, 8 …
  opts.row_group_bytes = 48 << 10;
  Written g = WriteOne(schema, batch, opts);
  ASSERT_GT(g.footer[4].list.size(), 1u);
  EXPECT_EQ(ReadColumn(g, 0), want_v);
  EXPECT_EQ(ReadColumn(g, 1), want_s);
  size_t next_try = 0;
  size_t run = 2;
  for (size_t rg = 0; rg < g.footer[4].list.size(); ++rg) {
    const bool tries = rg == next_try;
    if (tries) {
      next_try = rg + run + 1;
      run = std::min<size_t>(run * 2, EncodingHints::kMaxPlainChunks);
    }
    for (size_t c = 0; c < 2; ++c) {
      const std::string kinds = PageKinds(g, rg, c);
      if (tries) {
        EXPECT_EQ(kinds[0], 'D') << rg << " " << kinds;
        EXPECT_NE(kinds.find('P'), std::string::npos) << rg << " " << kinds;
      } else {
        EXPECT_EQ(kinds.find_first_not_of('P'), std::string::npos) << rg << " " << kinds;
      }
    }
  }
}

// A chunk whose first values are nearly all distinct gives its dictionary up once it holds
// 16384 entries, long before the limit; one with repeats keeps it.
TEST(WriterTest, NearlyDistinctValuesGiveTheDictionaryUpEarly) {
  auto schema = MakeSchema({{1, "id", DataType::Int64(), true}, {2, "c", DataType::Int64(), true}});
  Batch batch(schema);
  std::mt19937_64 rng(3);
  std::set<int64_t> distinct;
  for (int64_t i = 0; i < 100000; ++i) {
    batch.column(0).AppendInt64(i * 2654435761LL);
    const auto c = static_cast<int64_t>(rng() % 20000);  // about 5 times each
    batch.column(1).AppendInt64(c);
    distinct.insert(c);
  }
  WriterOptions opts;
  opts.compression = Compression::kUncompressed;
  Written w = WriteOne(schema, batch, opts);
  auto id = testing::ReadChunk(w.file, w.footer, 0, 0);
  ASSERT_EQ(PageKinds(w, 0, 0)[0], 'D');
  EXPECT_EQ(id.pages[0].header[7][1].i, 16384);  // the dictionary's entries
  EXPECT_NE(PageKinds(w, 0, 0).find('P'), std::string::npos);
  const std::string c = PageKinds(w, 0, 1);
  EXPECT_EQ(c[0], 'D');
  EXPECT_EQ(c.find('P'), std::string::npos) << c;
  EXPECT_EQ(testing::ReadChunk(w.file, w.footer, 0, 1).pages[0].header[7][1].i,
            static_cast<int64_t>(distinct.size()));
}

// Small files of one table (a partitioned table's) sharing EncodingHints: the first file's
// chunk of distinct keys tells the next files to start that column PLAIN, 2 files then 4 …,
// while a column of few values keeps its dictionary in every file; files with hints of their
// own all build a dictionary of the keys.
TEST(WriterTest, FilesOfOneTableShareWhatTheirColumnsLookLike) {
  auto schema =
      MakeSchema({{1, "id", DataType::Int64(), true}, {2, "s", DataType::String(), true}});
  auto file = [&](int64_t n) {
    Batch b(schema);
    for (int64_t i = 0; i < 3000; ++i) {  // fewer rows than a chunk's own probe needs
      b.column(0).AppendInt64((n * 3000 + i) * 2654435761LL);
      b.column(1).AppendBytes(i % 3 == 0 ? "paid" : "shipped");
    }
    return b;
  };
  WriterOptions shared;
  shared.compression = Compression::kUncompressed;
  shared.hints = std::make_shared<EncodingHints>();
  std::string kinds_id, kinds_s;
  for (int64_t n = 0; n < 8; ++n) {
    const Batch b = file(n);
    Written w = WriteOne(schema, b, shared);
    kinds_id += PageKinds(w, 0, 0).substr(0, 1);
    kinds_s += PageKinds(w, 0, 1).substr(0, 1);
    std::vector<std::optional<std::string>> want;
    for (size_t i = 0; i < b.num_rows(); ++i) want.push_back(LE(b.column(0).ValueAt<int64_t>(i)));
    EXPECT_EQ(ReadColumn(w, 0), want) << n;
  }
  EXPECT_EQ(kinds_id, "DPPDPPPP");  // a dictionary in files 0 and 3 only
  EXPECT_EQ(kinds_s, "DDDDDDDD");
  WriterOptions own;
  own.compression = Compression::kUncompressed;
  for (int64_t n = 0; n < 3; ++n) {
    EXPECT_EQ(PageKinds(WriteOne(schema, file(n), own), 0, 0)[0], 'D') << n;
  }
}

// A column of many values, each twice (half distinct: past the probe), falls back once the
// dictionary reaches the default 1 MiB.
TEST(WriterTest, ManyValuesFallBackAtTheDefaultLimit) {
  auto schema = MakeSchema({{1, "id", DataType::Int64(), true}});
  Batch batch(schema);
  auto value = [](int64_t i) { return (i / 2) * 2654435761LL; };
  for (int64_t i = 0; i < 400000; ++i) batch.column(0).AppendInt64(value(i));
  WriterOptions opts;
  opts.compression = Compression::kUncompressed;
  Written w = WriteOne(schema, batch, opts);
  auto chunk = testing::ReadChunk(w.file, w.footer, 0, 0);
  ASSERT_EQ(chunk.pages[0].header[1].i, 2);
  EXPECT_EQ(chunk.pages[0].header[7][1].i, 131072);  // 1 MiB of int64
  EXPECT_EQ(chunk.pages[0].header[2].i, 1 << 20);
  std::string kinds = PageKinds(w, 0, 0);
  EXPECT_EQ(kinds.front(), 'D');
  EXPECT_EQ(kinds.back(), 'P');
  ASSERT_EQ(chunk.values.size(), 400000u);
  for (int64_t i = 0; i < 400000; i += 997) {
    EXPECT_EQ(*chunk.values[static_cast<size_t>(i)], LE(value(i)));
  }
  EXPECT_EQ(w.metrics.columns[0].upper_bound, LE<int64_t>(value(399999)));
}

// NULLs with dictionaries: all-NULL pages inside a dictionary chunk, an all-NULL chunk (no
// dictionary page: nothing to put in it), a single distinct value (bit width 1).
TEST(WriterTest, DictionaryWithNulls) {
  auto schema = MakeSchema({{1, "s", DataType::String(), false},
                            {2, "none", DataType::Int64(), false},
                            {3, "one", DataType::Float64(), false}});
  Batch batch(schema);
  std::vector<std::optional<std::string>> want;
  for (int i = 0; i < 5000; ++i) {
    if (i < 1000 || (i >= 2000 && i < 3500) || i % 3 == 0) {
      batch.column(0).AppendNull();
      want.emplace_back(std::nullopt);
    } else {
      std::string v = i % 2 == 0 ? "even" : "odd";
      batch.column(0).AppendBytes(v);
      want.emplace_back(v);
    }
    batch.column(1).AppendNull();
    if (i % 4 == 0)
      batch.column(2).AppendNull();
    else
      batch.column(2).AppendDouble(2.5);
  }
  WriterOptions opts;
  opts.compression = Compression::kUncompressed;
  opts.page_bytes = 512;
  Written w = WriteOne(schema, batch, opts);
  EXPECT_EQ(ReadColumn(w, 0), want);
  std::string kinds = PageKinds(w, 0, 0);
  EXPECT_EQ(kinds.substr(0, 2), "DP") << kinds;  // the first pages hold NULLs only: empty PLAIN
  EXPECT_NE(kinds.find('R'), std::string::npos);
  EXPECT_EQ(EncodingStats(w, 0, 0), CountKinds(kinds));
  EXPECT_EQ(ColumnMeta(w, 0, 0)[12][6].bin, "even");
  EXPECT_EQ(ColumnMeta(w, 0, 0)[12][5].bin, "odd");
  // All NULL: PLAIN pages, no dictionary page, no min/max.
  EXPECT_EQ(PageKinds(w, 0, 1).find_first_not_of('P'), std::string::npos);
  EXPECT_FALSE(ColumnMeta(w, 0, 1).has(11));
  EXPECT_EQ(ColumnMeta(w, 0, 1)[12][3].i, 5000);
  EXPECT_FALSE(ColumnMeta(w, 0, 1)[12].has(5));
  auto all_null = ReadColumn(w, 1);
  EXPECT_EQ(all_null, std::vector<std::optional<std::string>>(5000));
  // One distinct value.
  auto one = testing::ReadChunk(w.file, w.footer, 0, 2);
  EXPECT_EQ(one.pages[0].header[7][1].i, 1);
  for (size_t r = 0; r < one.values.size(); ++r) {
    EXPECT_EQ(one.values[r], r % 4 == 0 ? std::nullopt : std::optional<std::string>(LE(2.5)));
  }
  EXPECT_EQ(w.metrics.columns[2].lower_bound, LE(2.5));
}

// A low-cardinality column that never falls back keeps its memory bounded too: the dictionary
// is bounded by its own size, the open page of indices by page_bytes.
TEST(WriterTest, DictionaryMemoryStaysBounded) {
  auto schema =
      MakeSchema({{1, "k", DataType::Int64(), false}, {2, "s", DataType::String(), false}});
  std::string file;
  WriterOptions opts;
  opts.row_group_bytes = 256 << 10;
  opts.page_bytes = 32 << 10;
  opts.dictionary_page_bytes = 64 << 10;
  auto w = Writer::Open(std::make_unique<SharedStringStream>(&file), schema, opts);
  ASSERT_TRUE(w.ok());
  Batch batch(schema);
  std::mt19937_64 rng(3);
  uint64_t peak = 0, peak_first_half = 0;
  for (int b = 0; b < 100; ++b) {
    batch.Clear();
    for (int i = 0; i < 20000; ++i) {
      uint64_t x = rng() % 500;  // 500 distinct values: 4 KB of int64 dictionary
      batch.column(0).AppendInt64(static_cast<int64_t>(x));
      batch.column(1).AppendBytes(b % 2 == 0 ? "s" + std::to_string(x) : std::to_string(rng()));
    }
    ASSERT_TRUE((*w)->Write(batch).ok());
    uint64_t mem = (*w)->BufferedMemoryBytes();
    peak = std::max(peak, mem);
    if (b < 50) peak_first_half = peak;
    ASSERT_LT(mem,
              3 * opts.row_group_bytes + 6 * opts.page_bytes + 2 * 6 * opts.dictionary_page_bytes);
  }
  EXPECT_LE(peak, peak_first_half * 5 / 4);
  auto m = (*w)->Close();
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->record_count, 2000000u);
  EXPECT_GT(m->split_offsets.size(), 5u);
}

INSTANTIATE_TEST_SUITE_P(Codecs, WriterCodecTest,
                         ::testing::Values(Compression::kZstd, Compression::kSnappy,
                                           Compression::kUncompressed));

}  // namespace
}  // namespace ferry::parquet
