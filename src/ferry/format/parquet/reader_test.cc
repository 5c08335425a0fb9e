#include "ferry/format/parquet/reader.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ferry/base/testing/temp_dir.h"
#include "ferry/format/parquet/thrift_compact.h"
#include "ferry/format/parquet/writer.h"

namespace ferry::parquet {
namespace {

std::shared_ptr<const Schema> MakeSchema(std::vector<Field> fields) {
  auto s = std::make_shared<Schema>();
  s->fields = std::move(fields);
  return s;
}

std::string WriteFile(const std::shared_ptr<const Schema>& schema,
                      const std::vector<const Batch*>& batches, WriterOptions opts = {}) {
  auto out = std::make_unique<StringOutputStream>();
  StringOutputStream* raw = out.get();
  auto w = Writer::Open(std::move(out), schema, opts);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  for (const Batch* b : batches) {
    Status s = (*w)->Write(*b);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  auto m = (*w)->Close();
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return raw->str();
}

// Every row of every row group, appended into one batch.
Result<Batch> ReadAll(std::string file, std::shared_ptr<const Schema> schema,
                      ReaderOptions opts = {}) {
  FERRY_ASSIGN_OR_RETURN(auto r,
                         Reader::Open(MemoryFile(std::move(file), "test.parquet"), schema, opts));
  Batch all(schema);
  Batch rg(schema);
  uint64_t rows = 0;
  for (size_t g = 0; g < r->num_row_groups(); ++g) {
    FERRY_RETURN_IF_ERROR(r->ReadRowGroup(g, &rg));
    if (rg.num_rows() != r->row_group_rows(g)) return Status::Internal("row group size differs");
    rows += rg.num_rows();
    for (size_t c = 0; c < schema->fields.size(); ++c) {
      for (size_t i = 0; i < rg.num_rows(); ++i) AppendValue(rg.column(c), i, &all.column(c));
    }
  }
  if (rows != r->num_rows()) return Status::Internal("row count differs from the footer's");
  return all;
}

// Same NULLs and the same bytes for every value (floats bitwise: NaN and -0.0 included).
void ExpectSameColumn(const Column& want, const Column& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  if (want.type().is_list()) {
    ASSERT_TRUE(got.type().is_list()) << what;
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_EQ(want.IsValid(i), got.IsValid(i)) << what << " row " << i;
      ASSERT_EQ(want.ListRange(i), got.ListRange(i)) << what << " row " << i;
    }
    ExpectSameColumn(want.list_child(), got.list_child(), what + " elements");
    return;
  }
  const int w = want.type().FixedWidth();
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(want.IsValid(i), got.IsValid(i)) << what << " row " << i;
    if (!want.IsValid(i)) continue;
    if (w > 0) {
      ASSERT_EQ(std::memcmp(want.fixed_data() + i * w, got.fixed_data() + i * w, w), 0)
          << what << " row " << i;
    } else {
      ASSERT_EQ(want.GetBytes(i), got.GetBytes(i)) << what << " row " << i;
    }
  }
}

void ExpectSameBatch(const Batch& want, const Batch& got, const std::string& what) {
  ASSERT_EQ(want.num_columns(), got.num_columns());
  for (size_t c = 0; c < want.num_columns(); ++c) {
    ExpectSameColumn(want.column(c), got.column(c),
                     what + " column " + want.schema()->fields[c].name);
  }
}

std::vector<Field> EveryTypeFields(bool required) {
  return {
      {1, "b", DataType::Boolean(), required, ""},
      {2, "i32", DataType::Int32(), required, ""},
      {3, "i64", DataType::Int64(), required, ""},
      {4, "f32", DataType::Float32(), required, ""},
      {5, "f64", DataType::Float64(), required, ""},
      {6, "d9", DataType::Decimal(9, 2), required, ""},
      {7, "d18", DataType::Decimal(18, 4), required, ""},
      {8, "d38", DataType::Decimal(38, 10), required, ""},
      {9, "date", DataType::Date(), required, ""},
      {10, "time", DataType::Time(), required, ""},
      {11, "ts", DataType::Timestamp(), required, ""},
      {12, "tstz", DataType::TimestampTz(), required, ""},
      {13, "s", DataType::String(), required, ""},
      {14, "bin", DataType::Binary(), required, ""},
      {15, "uuid", DataType::Uuid(), required, ""},
  };
}

int128_t MaxDecimal(int digits) {
  int128_t v = 1;
  for (int i = 0; i < digits; ++i) v *= 10;
  return v - 1;
}

// `rows` rows of every type with extremes, NaN, infinities, zeros of both signs, empty and long
// strings and, when the fields are optional, NULLs. `distinct` bounds the number of distinct
// values (low: the dictionary holds; high: it falls back).
Batch EveryTypeBatch(std::shared_ptr<const Schema> schema, size_t rows, size_t distinct,
                     bool nulls) {
  Batch b(schema);
  std::mt19937_64 rng(42);
  const double f64_special[] = {std::numeric_limits<double>::quiet_NaN(),
                                -0.0,
                                0.0,
                                std::numeric_limits<double>::infinity(),
                                -std::numeric_limits<double>::infinity(),
                                std::numeric_limits<double>::max(),
                                std::numeric_limits<double>::lowest(),
                                std::numeric_limits<double>::denorm_min()};
  const float f32_special[] = {std::numeric_limits<float>::quiet_NaN(),
                               -0.0f,
                               0.0f,
                               std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::lowest()};
  for (size_t r = 0; r < rows; ++r) {
    const uint64_t k = rng() % distinct;
    for (size_t c = 0; c < schema->fields.size(); ++c) {
      Column& col = b.column(c);
      if (nulls && (r + c) % 7 == 3) {
        col.AppendNull();
        continue;
      }
      const int64_t sk = static_cast<int64_t>(k) - static_cast<int64_t>(distinct / 2);
      switch (col.type().kind()) {
        case TypeKind::kBoolean:
          col.AppendBool(k % 2 == 0);
          break;
        case TypeKind::kInt32:
          col.AppendInt32(k == 0   ? std::numeric_limits<int32_t>::min()
                          : k == 1 ? std::numeric_limits<int32_t>::max()
                                   : static_cast<int32_t>(sk));
          break;
        case TypeKind::kInt64:
          col.AppendInt64(k == 0   ? std::numeric_limits<int64_t>::min()
                          : k == 1 ? std::numeric_limits<int64_t>::max()
                                   : sk * 1000003);
          break;
        case TypeKind::kFloat32:
          col.AppendFloat(k < 6 ? f32_special[k] : static_cast<float>(sk) / 3.0f);
          break;
        case TypeKind::kFloat64:
          col.AppendDouble(k < 8 ? f64_special[k] : static_cast<double>(sk) / 7.0);
          break;
        case TypeKind::kDecimal: {
          const int128_t max = MaxDecimal(col.type().precision());
          col.AppendDecimal(k == 0 ? max : k == 1 ? -max : static_cast<int128_t>(sk) * 12345);
          break;
        }
        case TypeKind::kDate:
          col.AppendInt32(k == 0 ? -719162 : k == 1 ? 2932896 : static_cast<int32_t>(sk));
          break;
        case TypeKind::kTime:
          col.AppendInt64(k == 0 ? 0 : k == 1 ? 86399999999 : static_cast<int64_t>(k) * 1000);
          break;
        case TypeKind::kTimestamp:
        case TypeKind::kTimestampTz:
          col.AppendInt64(k == 0 ? -62135596800000000 : sk * 1000000007);
          break;
        case TypeKind::kString:
          col.AppendBytes(k == 0   ? std::string()
                          : k == 1 ? std::string(5000, 'x') + "\xe2\x82\xac"
                                   : "value " + std::to_string(k) + " \xc3\xa9");
          break;
        case TypeKind::kBinary: {
          std::string v = k == 0 ? std::string() : std::string(1 + k % 40, '\0');
          for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<char>((k * 31 + i) & 0xFF);
          col.AppendBytes(v);
          break;
        }
        case TypeKind::kUuid: {
          uint8_t u[16];
          for (int i = 0; i < 16; ++i) u[i] = static_cast<uint8_t>(k * 7 + i * (k == 1 ? 17 : 1));
          if (k == 1) std::memset(u, 0xFF, 16);
          col.AppendUuid(u);
          break;
        }
        case TypeKind::kList:  // lists are built by ListBatch
          col.AppendListEnd();
          break;
      }
    }
  }
  return b;
}

struct Variant {
  Compression compression;
  bool dictionary;
  size_t distinct;
};

TEST(ReaderTest, RoundTripsEveryTypeEveryCodecWithAndWithoutDictionaries) {
  const Variant variants[] = {
      {Compression::kZstd, true, 20},        {Compression::kZstd, true, 100000},
      {Compression::kSnappy, true, 20},      {Compression::kSnappy, false, 5000},
      {Compression::kUncompressed, true, 3}, {Compression::kUncompressed, false, 5000},
  };
  for (bool required : {false, true}) {
    auto schema = MakeSchema(EveryTypeFields(required));
    for (const auto& v : variants) {
      SCOPED_TRACE(::testing::Message()
                   << "required " << required << " codec " << static_cast<int>(v.compression)
                   << " dictionary " << v.dictionary << " distinct " << v.distinct);
      Batch b = EveryTypeBatch(schema, 3000, v.distinct, !required);
      WriterOptions opts;
      opts.compression = v.compression;
      opts.dictionary = v.dictionary;
      opts.page_bytes = 2048;        // many pages per chunk
      opts.row_group_bytes = 64000;  // several row groups
      std::string file = WriteFile(schema, {&b}, opts);
      auto got = ReadAll(file, schema);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ExpectSameBatch(b, *got, "round trip");
    }
  }
}

TEST(ReaderTest, ReadsChunksThatFallBackFromDictionaryToPlain) {
  auto schema = MakeSchema(EveryTypeFields(false));
  Batch b = EveryTypeBatch(schema, 4000, 100000, true);
  WriterOptions opts;
  opts.dictionary_page_bytes = 1024;  // falls back mid-chunk: dictionary and PLAIN pages
  opts.page_bytes = 4096;
  std::string file = WriteFile(schema, {&b}, opts);
  auto got = ReadAll(file, schema);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameBatch(b, *got, "fallback");
}

TEST(ReaderTest, ReadsAllNullAndEmptyColumnsAndEmptyFiles) {
  auto schema =
      MakeSchema({{1, "a", DataType::Int64(), false, ""}, {2, "s", DataType::String(), false, ""}});
  Batch b(schema);
  for (int i = 0; i < 100; ++i) {
    b.column(0).AppendNull();
    b.column(1).AppendNull();
  }
  auto got = ReadAll(WriteFile(schema, {&b}), schema);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameBatch(b, *got, "all NULL");

  auto empty = ReadAll(WriteFile(schema, {}), schema);
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(empty->num_rows(), 0u);
}

TEST(ReaderTest, MatchesColumnsByFieldIdNotByName) {
  auto written = MakeSchema(
      {{1, "id", DataType::Int64(), true, ""}, {2, "name", DataType::String(), false, ""}});
  Batch b(written);
  for (int i = 0; i < 10; ++i) {
    b.column(0).AppendInt64(i);
    b.column(1).AppendBytes("n" + std::to_string(i));
  }
  std::string file = WriteFile(written, {&b});
  // Renamed, reordered, and a column added after the file was written (reads as NULL).
  auto read = MakeSchema({{2, "renamed", DataType::String(), false, ""},
                          {7, "added", DataType::Float64(), false, ""},
                          {1, "key", DataType::Int64(), true, ""}});
  auto got = ReadAll(file, read);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->num_rows(), 10u);
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(got->column(0).GetBytes(i), "n" + std::to_string(i));
    EXPECT_FALSE(got->column(1).IsValid(i));
    EXPECT_EQ(got->column(2).values<int64_t>()[i], static_cast<int64_t>(i));
  }
  // A field id the file does not have, for a required field: refused, not invented.
  auto missing = MakeSchema({{9, "id", DataType::Int64(), true, ""}});
  auto r = Reader::Open(MemoryFile(file, "f.parquet"), missing);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("field id 9"), std::string::npos) << r.status().message();
}

TEST(ReaderTest, WidensTypesAsIcebergAllowsAndRefusesOtherChanges) {
  auto written = MakeSchema({{1, "i", DataType::Int32(), false, ""},
                             {2, "f", DataType::Float32(), false, ""},
                             {3, "d", DataType::Decimal(9, 2), false, ""}});
  Batch b(written);
  b.column(0).AppendInt32(-7);
  b.column(1).AppendFloat(1.5f);
  b.column(2).AppendDecimal(-12345);
  b.column(0).AppendNull();
  b.column(1).AppendNull();
  b.column(2).AppendNull();
  std::string file = WriteFile(written, {&b});
  auto wide = MakeSchema({{1, "i", DataType::Int64(), false, ""},
                          {2, "f", DataType::Float64(), false, ""},
                          {3, "d", DataType::Decimal(20, 2), false, ""}});
  auto got = ReadAll(file, wide);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->column(0).values<int64_t>()[0], -7);
  EXPECT_EQ(got->column(1).values<double>()[0], 1.5);
  int128_t d;
  std::memcpy(&d, got->column(2).fixed_data(), 16);
  EXPECT_TRUE(d == -12345);
  EXPECT_FALSE(got->column(0).IsValid(1));

  auto narrowed = MakeSchema({{1, "i", DataType::String(), false, ""}});
  auto r = Reader::Open(MemoryFile(file, "f.parquet"), narrowed);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(r.status().message().find("INT32"), std::string::npos) << r.status().message();

  auto rescaled = MakeSchema({{3, "d", DataType::Decimal(9, 3), false, ""}});
  r = Reader::Open(MemoryFile(file, "f.parquet"), rescaled);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotSupported);
}

TEST(ReaderTest, ReadsLocalFilesRowGroupByRowGroup) {
  ferry::testing::TempDir tmp;
  const std::string path = (tmp.path() / "x.parquet").string();
  auto schema = MakeSchema(EveryTypeFields(false));
  Batch b = EveryTypeBatch(schema, 2000, 50, true);
  {
    auto out = LocalOutputStream::Create(path);
    ASSERT_TRUE(out.ok());
    WriterOptions opts;
    opts.row_group_bytes = 16000;
    auto w = Writer::Open(std::move(*out), schema, opts);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Write(b).ok());
    ASSERT_TRUE((*w)->Close().ok());
  }
  auto file = OpenLocalFile(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto r = Reader::Open(std::move(*file), schema);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_GT((*r)->num_row_groups(), 2u);
  EXPECT_EQ((*r)->num_rows(), 2000u);
  Batch rg(schema);
  size_t row = 0;
  for (size_t g = 0; g < (*r)->num_row_groups(); ++g) {
    ASSERT_TRUE((*r)->ReadRowGroup(g, &rg).ok());
    // Each batch holds one row group only.
    EXPECT_EQ(rg.num_rows(), (*r)->row_group_rows(g));
    for (size_t i = 0; i < rg.num_rows(); ++i, ++row) {
      ASSERT_EQ(rg.column(1).IsValid(i), b.column(1).IsValid(row));
      if (b.column(1).IsValid(row)) {
        ASSERT_EQ(rg.column(1).values<int32_t>()[i], b.column(1).values<int32_t>()[row]);
      }
    }
  }
  EXPECT_EQ(row, 2000u);
  auto missing = OpenLocalFile((tmp.path() / "nope.parquet").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

// Reads a possibly damaged file to the end; returns its status (never crashes).
Status ReadEverything(std::string bytes, const std::shared_ptr<const Schema>& schema) {
  ReaderOptions opts;
  opts.max_page_bytes = 8u << 20;
  opts.max_page_values = 1u << 20;
  opts.max_row_group_rows = 1u << 20;
  auto r = Reader::Open(MemoryFile(std::move(bytes), "damaged.parquet"), schema, opts);
  if (!r.ok()) return r.status();
  Batch b(schema);
  for (size_t g = 0; g < (*r)->num_row_groups(); ++g) {
    FERRY_RETURN_IF_ERROR((*r)->ReadRowGroup(g, &b));
  }
  return Status::OK();
}

TEST(ReaderTest, TruncatedFilesGiveClearErrors) {
  auto schema = MakeSchema(EveryTypeFields(false));
  Batch b = EveryTypeBatch(schema, 300, 40, true);
  WriterOptions opts;
  opts.page_bytes = 1024;
  const std::string file = WriteFile(schema, {&b}, opts);
  ASSERT_TRUE(ReadEverything(file, schema).ok());
  for (size_t len = 0; len < file.size(); len += (len < 64 ? 1 : 37)) {
    Status s = ReadEverything(file.substr(0, len), schema);
    ASSERT_FALSE(s.ok()) << "a file cut at " << len << " bytes of " << file.size() << " was read";
    EXPECT_EQ(s.code(), StatusCode::kCorruption) << s.ToString();
    EXPECT_NE(s.message().find("damaged.parquet"), std::string::npos) << s.message();
  }
  Status s = ReadEverything(file.substr(0, file.size() - 1), schema);
  EXPECT_NE(s.message().find("PAR1"), std::string::npos) << s.message();
}

TEST(ReaderTest, CorruptedBytesGiveErrorsNotCrashes) {
  auto schema = MakeSchema(EveryTypeFields(false));
  Batch b = EveryTypeBatch(schema, 300, 40, true);
  for (Compression c : {Compression::kZstd, Compression::kSnappy, Compression::kUncompressed}) {
    WriterOptions opts;
    opts.compression = c;
    opts.page_bytes = 1024;
    const std::string file = WriteFile(schema, {&b}, opts);
    std::mt19937 rng(7);
    int failures = 0;
    for (int trial = 0; trial < 1500; ++trial) {
      std::string damaged = file;
      const int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f) {
        // Half the time in the footer, where the structure lives.
        const size_t footer = file.size() > 600 ? file.size() - 600 : 0;
        size_t at = trial % 2 == 0 ? footer + rng() % (file.size() - footer) : rng() % file.size();
        damaged[at] = static_cast<char>(rng() & 0xFF);
      }
      Status s = ReadEverything(std::move(damaged), schema);
      if (!s.ok()) {
        ++failures;
        EXPECT_TRUE(s.code() == StatusCode::kCorruption || s.code() == StatusCode::kNotSupported)
            << s.ToString();
      }
    }
    EXPECT_GT(failures, 100);  // damage is noticed (values may change silently; structure not)
  }
}

// ferry's writer writes data pages v1; other writers write v2 (levels outside the compressed
// section, no length prefix) and RLE booleans. A file built by hand with both.
TEST(ReaderTest, ReadsDataPagesV2AndRleBooleans) {
  using thrift::CompactWriter;
  std::string file = "PAR1";
  struct Chunk {
    int64_t offset;
    int64_t size;
  };
  auto page_v2 = [&](const std::string& levels, const std::string& values, int32_t encoding,
                     int32_t nulls) {
    const int64_t offset = static_cast<int64_t>(file.size());
    std::string header;
    CompactWriter w(&header);
    w.BeginStruct();
    w.I32Field(1, 3);  // DATA_PAGE_V2
    w.I32Field(2, static_cast<int32_t>(levels.size() + values.size()));
    w.I32Field(3, static_cast<int32_t>(levels.size() + values.size()));
    w.StructField(8);
    w.I32Field(1, 4);  // num_values
    w.I32Field(2, nulls);
    w.I32Field(3, 4);  // num_rows
    w.I32Field(4, encoding);
    w.I32Field(5, static_cast<int32_t>(levels.size()));
    w.I32Field(6, 0);
    w.BoolField(7, false);  // is_compressed
    w.EndStruct();
    w.EndStruct();
    file += header + levels + values;
    return Chunk{offset, static_cast<int64_t>(file.size()) - offset};
  };
  std::string ints;
  for (int64_t v : {int64_t{10}, int64_t{-3}, int64_t{7}}) {
    ints.append(reinterpret_cast<const char*>(&v), 8);
  }
  // Levels 1,0,1,1: one bit-packed group (header 3), LSB first = 0x0D.
  const Chunk a = page_v2(std::string("\x03\x0D", 2), ints, 0, 1);
  // Booleans true,false,true,true as RLE: 4-byte length, then the same hybrid run.
  const Chunk b = page_v2("", std::string("\x02\x00\x00\x00\x03\x0D", 6), 3, 0);
  std::string footer;
  CompactWriter w(&footer);
  w.BeginStruct();
  w.I32Field(1, 2);
  w.ListField(2, thrift::kStruct, 3);
  w.BeginStruct();
  w.BinaryField(4, "schema");
  w.I32Field(5, 2);
  w.EndStruct();
  const std::pair<int32_t, int32_t> cols[] = {{2, 1}, {0, 0}};  // (physical, repetition)
  for (int i = 0; i < 2; ++i) {
    w.BeginStruct();
    w.I32Field(1, cols[i].first);
    w.I32Field(3, cols[i].second);
    w.BinaryField(4, i == 0 ? "a" : "b");
    w.I32Field(9, i + 1);
    w.EndStruct();
  }
  w.I64Field(3, 4);
  w.ListField(4, thrift::kStruct, 1);
  w.BeginStruct();
  w.ListField(1, thrift::kStruct, 2);
  for (int i = 0; i < 2; ++i) {
    const Chunk& c = i == 0 ? a : b;
    w.BeginStruct();
    w.I64Field(2, c.offset);
    w.StructField(3);
    w.I32Field(1, cols[i].first);
    w.ListField(2, thrift::kI32, 1);
    w.I32(i == 0 ? 0 : 3);
    w.ListField(3, thrift::kBinary, 1);
    w.Binary(i == 0 ? "a" : "b");
    w.I32Field(4, 0);  // UNCOMPRESSED
    w.I64Field(5, 4);
    w.I64Field(6, c.size);
    w.I64Field(7, c.size);
    w.I64Field(9, c.offset);
    w.EndStruct();
    w.EndStruct();
  }
  w.I64Field(2, a.size + b.size);
  w.I64Field(3, 4);
  w.EndStruct();
  w.EndStruct();
  const auto len = static_cast<uint32_t>(footer.size());
  file += footer;
  file.append(reinterpret_cast<const char*>(&len), 4);
  file += "PAR1";

  auto schema =
      MakeSchema({{2, "b", DataType::Boolean(), true, ""}, {1, "a", DataType::Int64(), false, ""}});
  auto got = ReadAll(file, schema);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->num_rows(), 4u);
  const Column& bools = got->column(0);
  const Column& longs = got->column(1);
  EXPECT_EQ(std::vector<uint8_t>(bools.fixed_data(), bools.fixed_data() + 4),
            (std::vector<uint8_t>{1, 0, 1, 1}));
  EXPECT_TRUE(longs.IsValid(0));
  EXPECT_FALSE(longs.IsValid(1));
  EXPECT_EQ(longs.values<int64_t>()[0], 10);
  EXPECT_EQ(longs.values<int64_t>()[2], -3);
  EXPECT_EQ(longs.values<int64_t>()[3], 7);
}

TEST(ReaderTest, RefusesFilesThatAreNotParquet) {
  auto schema = MakeSchema({{1, "a", DataType::Int64(), false, ""}});
  Status s = ReadEverything("PAR1 this is not a parquet file PAR1", schema);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  s = ReadEverything(std::string(100, 'x'), schema);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("magic"), std::string::npos) << s.message();
}

// ---- lists ----

// list<every type>: list field ids 1..15, element ids 101..115.
std::vector<Field> ListFields(bool required_lists, bool required_elements) {
  std::vector<Field> fields = EveryTypeFields(required_elements);
  for (auto& f : fields) {
    f.type = DataType::List(f.type, required_elements, f.id + 100);
    f.name = "l_" + f.name;
    f.required = required_lists;
  }
  return fields;
}

// Element values for list column c: a flat column of the element type from EveryTypeBatch.
std::shared_ptr<const Schema> ElementSchema(const Schema& lists) {
  std::vector<Field> fields;
  for (const auto& f : lists.fields) {
    fields.push_back(
        {f.type.list().id, f.name + ".element", f.type.list().type, f.type.list().required, ""});
  }
  return MakeSchema(std::move(fields));
}

// `rows` rows whose lists take the elements' values in order. Lengths cycle through a NULL list
// (when the lists are optional), an empty list, 1, 3 and 7 elements; every 500th row holds
// `long_len` elements (spanning many pages).
Batch ListBatch(std::shared_ptr<const Schema> schema, size_t rows, size_t distinct,
                bool element_nulls, size_t long_len) {
  const bool nullable = !schema->fields[0].required;
  std::vector<size_t> lens(rows);
  size_t total = 0;
  for (size_t r = 0; r < rows; ++r) {
    const size_t cycle[] = {0, 0, 1, 3, 7};
    lens[r] = r % 500 == 499 ? long_len : cycle[r % 5];
    total += lens[r];
  }
  Batch elements = EveryTypeBatch(ElementSchema(*schema), total, distinct, element_nulls);
  Batch b(schema);
  for (size_t c = 0; c < schema->fields.size(); ++c) {
    Column& col = b.column(c);
    size_t next = 0;
    for (size_t r = 0; r < rows; ++r) {
      if (nullable && r % 5 == 0 && (r / 5 + c) % 2 == 0) {
        col.AppendNull();
        next += lens[r];
        continue;
      }
      for (size_t e = 0; e < lens[r]; ++e) {
        AppendValue(elements.column(c), next + e, &col.list_child());
      }
      next += lens[r];
      col.AppendListEnd();
    }
  }
  return b;
}

TEST(ReaderTest, ListsRoundTripEveryTypeEveryCodec) {
  const Variant variants[] = {
      {Compression::kZstd, true, 20},
      {Compression::kSnappy, true, 100000},
      {Compression::kUncompressed, false, 5000},
  };
  for (bool required : {false, true}) {
    auto schema = MakeSchema(ListFields(required, required));
    for (const auto& v : variants) {
      SCOPED_TRACE(::testing::Message()
                   << "required " << required << " codec " << static_cast<int>(v.compression)
                   << " dictionary " << v.dictionary << " distinct " << v.distinct);
      Batch b = ListBatch(schema, 2000, v.distinct, !required, 3000);
      WriterOptions opts;
      opts.compression = v.compression;
      opts.dictionary = v.dictionary;
      opts.page_bytes = 2048;         // many pages per chunk; long lists exceed one
      opts.row_group_bytes = 100000;  // several row groups
      std::string file = WriteFile(schema, {&b}, opts);
      auto got = ReadAll(file, schema);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      ExpectSameBatch(b, *got, "lists");
      auto r = Reader::Open(MemoryFile(file), schema);
      ASSERT_TRUE(r.ok());
      EXPECT_GT((*r)->num_row_groups(), 1u);
    }
  }
}

TEST(ReaderTest, ListsKeepNullListsEmptyListsAndNullElementsApart) {
  auto schema = MakeSchema({{1, "id", DataType::Int64(), true, ""},
                            {2, "xs", DataType::List(DataType::String(), false, 3), false, ""}});
  Batch b(schema);
  // NULL, [], [NULL], ["a", NULL, ""], [""]
  b.column(0).AppendInt64(1);
  b.column(1).AppendNull();
  b.column(0).AppendInt64(2);
  b.column(1).AppendListEnd();
  b.column(0).AppendInt64(3);
  b.column(1).list_child().AppendNull();
  b.column(1).AppendListEnd();
  b.column(0).AppendInt64(4);
  b.column(1).list_child().AppendBytes("a");
  b.column(1).list_child().AppendNull();
  b.column(1).list_child().AppendBytes("");
  b.column(1).AppendListEnd();
  b.column(0).AppendInt64(5);
  b.column(1).list_child().AppendBytes("");
  b.column(1).AppendListEnd();
  for (bool dictionary : {true, false}) {
    WriterOptions opts;
    opts.dictionary = dictionary;
    auto got = ReadAll(WriteFile(schema, {&b}, opts), schema);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    const Column& xs = got->column(1);
    ASSERT_EQ(xs.size(), 5u);
    EXPECT_FALSE(xs.IsValid(0));
    EXPECT_TRUE(xs.IsValid(1));
    EXPECT_EQ(xs.ListRange(1), std::make_pair(size_t{0}, size_t{0}));
    EXPECT_EQ(xs.ListRange(2), std::make_pair(size_t{0}, size_t{1}));
    EXPECT_FALSE(xs.list_child().IsValid(0));
    EXPECT_EQ(xs.ListRange(3), std::make_pair(size_t{1}, size_t{4}));
    EXPECT_EQ(xs.list_child().GetBytes(1), "a");
    EXPECT_FALSE(xs.list_child().IsValid(2));
    EXPECT_TRUE(xs.list_child().IsValid(3));
    EXPECT_EQ(xs.list_child().GetBytes(3), "");
    EXPECT_EQ(xs.ListRange(4), std::make_pair(size_t{4}, size_t{5}));
  }
}

TEST(ReaderTest, ListDictionaryFallbackKeepsEveryListInOnePage) {
  auto schema = MakeSchema(ListFields(false, false));
  Batch b = ListBatch(schema, 3000, 100000, true, 400);
  WriterOptions opts;
  opts.dictionary_page_bytes = 1024;  // falls back mid-chunk, inside long lists
  opts.page_bytes = 4096;
  std::string file = WriteFile(schema, {&b}, opts);
  auto got = ReadAll(file, schema);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameBatch(b, *got, "list fallback");
}

TEST(ReaderTest, ListMetricsAreKeyedByTheElementWithoutBounds) {
  auto schema = MakeSchema({{1, "xs", DataType::List(DataType::Float64(), false, 2), false, ""},
                            {3, "n", DataType::Int32(), false, ""}});
  Batch b(schema);
  Column& xs = b.column(0);
  // [1.5, NaN, NULL], NULL, [], [-2]
  xs.list_child().AppendDouble(1.5);
  xs.list_child().AppendDouble(std::numeric_limits<double>::quiet_NaN());
  xs.list_child().AppendNull();
  xs.AppendListEnd();
  xs.AppendNull();
  xs.AppendListEnd();
  xs.list_child().AppendDouble(-2);
  xs.AppendListEnd();
  for (int i = 0; i < 4; ++i) b.column(1).AppendInt32(i);
  auto out = std::make_unique<StringOutputStream>();
  auto w = Writer::Open(std::move(out), schema, {});
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Write(b).ok());
  auto m = (*w)->Close();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  ASSERT_EQ(m->columns.size(), 2u);
  const ColumnMetrics& e = m->columns[0];
  EXPECT_EQ(e.field_id, 2);
  EXPECT_EQ(e.value_count, 6u);  // 3 elements + 1 element + a NULL list + an empty list
  EXPECT_EQ(e.null_count, 3u);   // the NULL element, the NULL list, the empty list
  ASSERT_TRUE(e.nan_count.has_value());
  EXPECT_EQ(*e.nan_count, 1u);
  EXPECT_FALSE(e.lower_bound.has_value());
  EXPECT_FALSE(e.upper_bound.has_value());
  EXPECT_EQ(m->columns[1].field_id, 3);
  EXPECT_TRUE(m->columns[1].lower_bound.has_value());
}

TEST(ReaderTest, ListsRefuseNullElementsWhereRequiredAndWidenOnRead) {
  auto strict = MakeSchema({{1, "xs", DataType::List(DataType::Int32(), true, 2), false, ""}});
  Batch b(strict);
  b.column(0).list_child().AppendNull();
  b.column(0).AppendListEnd();
  auto w = Writer::Open(std::make_unique<StringOutputStream>(), strict, {});
  ASSERT_TRUE(w.ok());
  Status s = (*w)->Write(b);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("xs"), std::string::npos) << s.message();

  auto ints = MakeSchema({{1, "xs", DataType::List(DataType::Int32(), false, 2), false, ""}});
  Batch in(ints);
  in.column(0).list_child().AppendInt32(-7);
  in.column(0).list_child().AppendInt32(std::numeric_limits<int32_t>::max());
  in.column(0).AppendListEnd();
  std::string file = WriteFile(ints, {&in});
  auto longs = MakeSchema({{1, "xs", DataType::List(DataType::Int64(), false, 2), false, ""}});
  auto got = ReadAll(file, longs);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const Column& child = got->column(0).list_child();
  ASSERT_EQ(child.size(), 2u);
  EXPECT_EQ(child.values<int64_t>()[0], -7);
  EXPECT_EQ(child.values<int64_t>()[1], std::numeric_limits<int32_t>::max());

  // A list read as a flat column (or the reverse) is refused, naming the column.
  auto flat = MakeSchema({{1, "xs", DataType::Int32(), false, ""}});
  auto r = ReadAll(file, flat);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotSupported);
  EXPECT_NE(r.status().message().find("xs"), std::string::npos) << r.status().message();
}

// A writer kept open among many (one per partition) flushes its row group and frees its buffers
// when told, then goes on writing: every row reads back, in order, from three row groups.
TEST(ReaderTest, FlushAndReleaseCutsARowGroupAndTheWriterGoesOn) {
  auto schema = MakeSchema({{1, "id", DataType::Int64(), true},
                            {2, "name", DataType::String(), false},
                            {3, "x", DataType::Float64(), false}});
  Batch all(schema);
  std::mt19937_64 rng(11);
  for (int i = 0; i < 30000; ++i) {
    all.column(0).AppendInt64(i);
    if (i % 7 == 0) {
      all.column(1).AppendNull();
    } else {
      all.column(1).AppendBytes("name " + std::to_string(rng() % 3000));
    }
    all.column(2).AppendDouble(static_cast<double>(rng() % 100000) / 3);
  }
  auto out = std::make_unique<StringOutputStream>();
  StringOutputStream* raw = out.get();
  auto w = Writer::Open(std::move(out), schema);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  Batch part(schema);
  const size_t cuts[] = {0, 10000, 10001, 30000};
  for (size_t k = 0; k + 1 < std::size(cuts); ++k) {
    part.Clear();
    for (size_t c = 0; c < 3; ++c) {
      for (size_t r = cuts[k]; r < cuts[k + 1]; ++r) part.column(c).AppendRowOf(all.column(c), r);
    }
    ASSERT_TRUE((*w)->Write(part).ok());
    const uint64_t before = (*w)->BufferedMemoryBytes();
    ASSERT_TRUE((*w)->FlushAndRelease().ok());
    EXPECT_LT((*w)->BufferedMemoryBytes(), 4096u) << "held " << before << " before";
  }
  ASSERT_TRUE((*w)->FlushAndRelease().ok());  // nothing buffered: no empty row group
  auto m = (*w)->Close();
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->record_count, 30000u);
  EXPECT_EQ(m->split_offsets.size(), 3u);
  auto r = Reader::Open(MemoryFile(raw->str(), "t.parquet"), schema);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)->row_group_rows(0), 10000u);
  EXPECT_EQ((*r)->row_group_rows(1), 1u);
  EXPECT_EQ((*r)->row_group_rows(2), 19999u);
  auto got = ReadAll(raw->str(), schema);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  for (size_t c = 0; c < 3; ++c) ExpectSameColumn(all.column(c), got->column(c), "column");
}

}  // namespace
}  // namespace ferry::parquet
