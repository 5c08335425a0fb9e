// Interop: files written by ferry's Parquet writer are read back by three readers we did not
// write (DuckDB, hyparquet, parquet-wasm/arrow-rs) through tests/interop/parquet_check.mjs, which
// compares values, schema (field ids, logical types), statistics and codec with expected.json.
// Skipped (with the reason) when node or tests/interop/node_modules is missing.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "ferry/format/parquet/reader.h"
#include "ferry/format/parquet/writer.h"

namespace ferry::parquet {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

std::string Hex(std::string_view b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (unsigned char c : b) {
    s.push_back(d[c >> 4]);
    s.push_back(d[c & 15]);
  }
  return s;
}

std::string Int128String(int128_t v) {
  if (v == 0) return "0";
  bool neg = v < 0;
  auto u = neg ? -static_cast<unsigned __int128>(v) : static_cast<unsigned __int128>(v);
  std::string s;
  while (u > 0) {
    s.push_back(static_cast<char>('0' + static_cast<int>(u % 10)));
    u /= 10;
  }
  if (neg) s.push_back('-');
  return std::string(s.rbegin(), s.rend());
}

int128_t Pow10(int n) {
  int128_t v = 1;
  for (int i = 0; i < n; ++i) v *= 10;
  return v;
}

json FloatJson(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  if (v == 0 && std::signbit(v)) return "-0";
  return v;
}

// The shared schema: every type, optional, plus required columns.
std::shared_ptr<const Schema> AllTypesSchema() {
  auto s = std::make_shared<Schema>();
  int id = 1;
  auto add = [&](const char* name, DataType t, bool required) {
    s->fields.push_back(Field{id++, name, t, required, ""});
  };
  add("b", DataType::Boolean(), false);
  add("i", DataType::Int32(), false);
  add("l", DataType::Int64(), false);
  add("f", DataType::Float32(), false);
  add("d", DataType::Float64(), false);
  add("dec9", DataType::Decimal(9, 2), false);
  add("dec18", DataType::Decimal(18, 4), false);
  add("dec38", DataType::Decimal(38, 10), false);
  add("dt", DataType::Date(), false);
  add("tm", DataType::Time(), false);
  add("ts", DataType::Timestamp(), false);
  add("tstz", DataType::TimestampTz(), false);
  add("s", DataType::String(), false);
  add("bin", DataType::Binary(), false);
  add("u", DataType::Uuid(), false);
  add("id", DataType::Int64(), true);
  add("name", DataType::String(), true);
  add("rdec", DataType::Decimal(38, 0), true);
  return s;
}

// Fills `batch` with rows [first, first + n) of a deterministic data set and appends the
// expected JSON rows. The first rows are the extremes; later rows are varied, NULL every 7th row.
// With cycle > 0, row r gets the values of row 12 + r % cycle: low cardinality, no extremes.
void Generate(Batch* batch, size_t first, size_t n, json* rows, size_t cycle = 0) {
  const std::string big(100000, 'x');
  const std::string big_unicode = [] {
    std::string s;
    for (int i = 0; i < 5000; ++i) s += "\xC3\xA9\xE2\x9C\x93\xF0\x9F\x98\x80";  // é ✓ 😀
    return s;
  }();
  const int128_t d38 = Pow10(38) - 1;
  for (size_t k = 0; k < n; ++k) {
    const size_t r = cycle > 0 ? 12 + (first + k) % cycle : first + k;
    json row = json::array();
    const bool null = r >= 12 && r % 7 == 0;  // optional columns
    const size_t x = r % 12;                  // extremes cycle for the first rows
    const bool extreme = r < 12;
    auto& c = *batch;
    // b
    if (null) {
      c.column(0).AppendNull();
      row.push_back(nullptr);
    } else {
      bool v = r % 3 == 0;
      c.column(0).AppendBool(v);
      row.push_back(v);
    }
    // i
    if (null) {
      c.column(1).AppendNull();
      row.push_back(nullptr);
    } else {
      static const int32_t ex[] = {std::numeric_limits<int32_t>::min(),
                                   std::numeric_limits<int32_t>::max(), 0, -1};
      int32_t v = extreme && x < 4 ? ex[x] : static_cast<int32_t>(r * 7919 % 100003) - 50000;
      c.column(1).AppendInt32(v);
      row.push_back(v);
    }
    // l
    if (null) {
      c.column(2).AppendNull();
      row.push_back(nullptr);
    } else {
      static const int64_t ex[] = {kI64Min, kI64Max, 0, -1};
      int64_t v = extreme && x < 4 ? ex[x] : static_cast<int64_t>(r) * 1000003 - 7000000000LL;
      c.column(2).AppendInt64(v);
      row.push_back(std::to_string(v));
    }
    // f
    if (null) {
      c.column(3).AppendNull();
      row.push_back(nullptr);
    } else {
      static const float ex[] = {
          std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
          -std::numeric_limits<float>::infinity(), -0.0f,
          std::numeric_limits<float>::max(),       std::numeric_limits<float>::denorm_min(),
          -std::numeric_limits<float>::max()};
      float v = extreme && x < 7 ? ex[x] : static_cast<float>(r) * 0.25f - 100.0f;
      c.column(3).AppendFloat(v);
      row.push_back(FloatJson(v));
    }
    // d
    if (null) {
      c.column(4).AppendNull();
      row.push_back(nullptr);
    } else {
      static const double ex[] = {std::numeric_limits<double>::quiet_NaN(),
                                  std::numeric_limits<double>::infinity(),
                                  -std::numeric_limits<double>::infinity(),
                                  -0.0,
                                  std::numeric_limits<double>::max(),
                                  std::numeric_limits<double>::denorm_min(),
                                  0.0,
                                  -1e300};
      double v = extreme && x < 8 ? ex[x] : static_cast<double>(r) / 3.0 - 1000.0;
      c.column(4).AppendDouble(v);
      row.push_back(FloatJson(v));
    }
    // dec9, dec18, dec38
    auto dec = [&](size_t col, int precision, int128_t gen) {
      if (null) {
        c.column(col).AppendNull();
        row.push_back(nullptr);
        return;
      }
      int128_t m = Pow10(precision) - 1;
      int128_t v = extreme && x < 3 ? (x == 0 ? m : x == 1 ? -m : 0) : gen;
      c.column(col).AppendDecimal(v);
      row.push_back(Int128String(v));
    };
    dec(5, 9, static_cast<int128_t>(r) * 12345 - 999999);
    dec(6, 18, static_cast<int128_t>(r) * 123456789011LL - 5);
    dec(7, 38, (r % 2 == 0 ? 1 : -1) * (d38 / (static_cast<int128_t>(r) + 3)));
    // dt
    if (null) {
      c.column(8).AppendNull();
      row.push_back(nullptr);
    } else {
      static const int32_t ex[] = {-719162, -1, 0, 2932896, -25567};
      int32_t v = extreme && x < 5 ? ex[x] : static_cast<int32_t>(r % 40000) - 20000;
      c.column(8).AppendInt32(v);
      row.push_back(v);
    }
    // tm
    if (null) {
      c.column(9).AppendNull();
      row.push_back(nullptr);
    } else {
      int64_t v = extreme && x < 2 ? (x == 0 ? 0 : 86399999999LL)
                                   : static_cast<int64_t>(r) * 1000001 % 86400000000LL;
      c.column(9).AppendInt64(v);
      row.push_back(std::to_string(v));
    }
    // ts, tstz
    for (size_t col : {size_t{10}, size_t{11}}) {
      if (null) {
        c.column(col).AppendNull();
        row.push_back(nullptr);
        continue;
      }
      static const int64_t ex[] = {-62135596800000000LL, 253402300799999999LL, -1, 0};
      int64_t v = extreme && x < 4 ? ex[x] : 1700000000000000LL + static_cast<int64_t>(r) * 1234567;
      c.column(col).AppendInt64(v);
      row.push_back(std::to_string(v));
    }
    // s
    if (null) {
      c.column(12).AppendNull();
      row.push_back(nullptr);
    } else {
      std::string v;
      switch (extreme ? x : 99) {
        case 0:
          v = "";
          break;
        case 1:
          v = "a";
          break;
        case 2:
          v = "h\xC3\xA9llo w\xC3\xB6rld \xE2\x9C\x93 \xF0\x9F\x98\x80";
          break;
        case 3:
          v = big;
          break;
        case 4:
          v = big_unicode;
          break;
        case 5:
          v = "quote\" backslash\\ tab\t newline\n";
          break;
        default:
          v = "row " + std::to_string(r);
      }
      c.column(12).AppendBytes(v);
      row.push_back(v);
    }
    // bin
    if (null) {
      c.column(13).AppendNull();
      row.push_back(nullptr);
    } else {
      std::string v;
      switch (extreme ? x : 99) {
        case 0:
          v = "";
          break;
        case 1:
          v = std::string("\x00\xff\x00", 3);
          break;
        case 2:
          v = std::string(20000, '\xfe');
          break;
        default:
          v = std::string(1, static_cast<char>(r & 0xff)) + "bin" + std::to_string(r);
      }
      c.column(13).AppendBytes(v);
      row.push_back(Hex(v));
    }
    // u
    if (null) {
      c.column(14).AppendNull();
      row.push_back(nullptr);
    } else {
      uint8_t b[16];
      for (int i = 0; i < 16; ++i)
        b[i] = static_cast<uint8_t>(r * 31 + static_cast<size_t>(i) * 17);
      if (extreme && x == 0) std::memset(b, 0, 16);
      if (extreme && x == 1) std::memset(b, 0xff, 16);
      c.column(14).AppendUuid(b);
      row.push_back(Hex(std::string_view(reinterpret_cast<const char*>(b), 16)));
    }
    // id (required)
    c.column(15).AppendInt64(static_cast<int64_t>(r));
    row.push_back(std::to_string(r));
    // name (required)
    std::string name = r % 5 == 0 ? std::string() : "n" + std::to_string(r * 13 % 1000);
    c.column(16).AppendBytes(name);
    row.push_back(name);
    // rdec (required, decimal(38,0))
    int128_t rd = extreme && x < 2 ? (x == 0 ? d38 : -d38) : static_cast<int128_t>(r) - 3;
    c.column(17).AppendDecimal(rd);
    row.push_back(Int128String(rd));
    rows->push_back(std::move(row));
  }
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out.push_back(c);
  }
  return out + "'";
}

class ParquetInteropTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    interop_dir_ = std::string(FERRY_SOURCE_DIR) + "/tests/interop";
    if (std::system("node --version > /dev/null 2>&1") != 0) {
      if (std::getenv("FERRY_REQUIRE_INTEROP") != nullptr) {
        GTEST_FAIL() << "node is not on PATH: install Node.js to run the Parquet interop checks";
      }
      GTEST_SKIP() << "node is not on PATH: install Node.js to run the Parquet interop checks";
    }
    if (!fs::exists(interop_dir_ + "/node_modules/@duckdb/node-api") ||
        !fs::exists(interop_dir_ + "/node_modules/hyparquet") ||
        !fs::exists(interop_dir_ + "/node_modules/parquet-wasm")) {
      if (std::getenv("FERRY_REQUIRE_INTEROP") != nullptr) {
        GTEST_FAIL() << interop_dir_
                     << "/node_modules is missing the readers: run `npm install` in "
                     << interop_dir_;
      }
      GTEST_SKIP() << interop_dir_ << "/node_modules is missing the readers: run `npm install` in "
                   << interop_dir_;
    }
    char tmpl[] = "/tmp/ferry-parquet-interop-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    if (!dir_.empty() && std::getenv("FERRY_KEEP_INTEROP") == nullptr) fs::remove_all(dir_);
  }

  // Writes `total` rows in batches of `batch_rows`, then runs the checker.
  // `dictionary` is what parquet_check.mjs expects of the non-boolean columns' chunks: "on"
  // (dictionary page, RLE_DICTIONARY data pages only), "off" (PLAIN only) or "fallback" (a
  // dictionary page, RLE_DICTIONARY then PLAIN data pages).
  void WriteAndCheck(const std::string& name, WriterOptions opts, size_t total, size_t batch_rows,
                     size_t min_row_groups = 1, const std::string& dictionary = "on",
                     size_t cycle = 0) {
    auto schema = AllTypesSchema();
    std::string path = dir_ + "/" + name + ".parquet";
    auto out = LocalOutputStream::Create(path);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    auto w = Writer::Open(std::move(*out), schema, opts);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    json rows = json::array();
    Batch batch(schema);
    for (size_t r = 0; r < total; r += batch_rows) {
      batch.Clear();
      Generate(&batch, r, std::min(batch_rows, total - r), &rows, cycle);
      ASSERT_TRUE((*w)->Write(batch).ok());
    }
    auto m = (*w)->Close();
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(m->file_size_bytes, fs::file_size(path));
    EXPECT_EQ(m->record_count, total);
    EXPECT_GE(m->split_offsets.size(), min_row_groups);

    json expected;
    expected["columns"] = json::array();
    for (const auto& f : schema->fields) {
      expected["columns"].push_back({{"name", f.name},
                                     {"field_id", f.id},
                                     {"type", f.type.ToIceberg()},
                                     {"required", f.required}});
    }
    expected["rows"] = std::move(rows);
    expected["codec"] = opts.compression == Compression::kZstd     ? "ZSTD"
                        : opts.compression == Compression::kSnappy ? "SNAPPY"
                                                                   : "UNCOMPRESSED";
    expected["row_groups"] = m->split_offsets.size();
    expected["dictionary"] = dictionary;
    std::string expected_path = dir_ + "/" + name + ".json";
    std::ofstream(expected_path) << expected.dump();

    std::string cmd = "node " + ShellQuote(interop_dir_ + "/parquet_check.mjs") + " " +
                      ShellQuote(path) + " " + ShellQuote(expected_path) + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string output;
    char buf[4096];
    size_t got;
    while ((got = fread(buf, 1, sizeof(buf), p)) > 0) output.append(buf, got);
    int rc = pclose(p);
    std::printf("%s", output.c_str());
    EXPECT_EQ(rc, 0) << "parquet_check.mjs reported differences for " << path << ":\n" << output;
  }

  // Lists: list<T> of every type (optional lists, optional elements) and a required list of
  // required longs, whose elements are Generate's values in order. Row r's list is NULL
  // (r % 6 == 0, optional lists only), empty (1), or holds 1, 3, 5 or 300 elements.
  void WriteAndCheckLists(const std::string& name, WriterOptions opts, size_t total,
                          const std::string& dictionary) {
    auto flat = AllTypesSchema();
    auto schema = std::make_shared<Schema>();
    std::vector<size_t> sources;  // the flat column each list takes its elements from
    int id = 1;
    for (size_t c = 0; c < flat->fields.size(); ++c) {
      const Field& f = flat->fields[c];
      if (f.required && f.name != "id") continue;
      const int list_id = id++;
      const int element_id = id++;
      schema->fields.push_back(Field{list_id, "list_" + f.name,
                                     DataType::List(f.type, f.required, element_id), f.required,
                                     ""});
      sources.push_back(c);
    }
    std::vector<size_t> lens(total);
    size_t elements = 0;
    for (size_t r = 0; r < total; ++r) {
      const size_t cycle[] = {0, 0, 1, 3, 5, 300};
      lens[r] = cycle[r % 6];
      elements += lens[r];
    }
    Batch flat_batch(flat);
    json flat_rows = json::array();
    Generate(&flat_batch, 0, elements, &flat_rows);
    Batch batch(schema);
    json rows = json::array();
    for (size_t r = 0, next = 0; r < total; next += lens[r], ++r) {
      json row = json::array();
      for (size_t c = 0; c < sources.size(); ++c) {
        Column& col = batch.column(c);
        if (r % 6 == 0 && !schema->fields[c].required) {
          col.AppendNull();
          row.push_back(nullptr);
          continue;
        }
        json list = json::array();
        for (size_t e = next; e < next + lens[r]; ++e) {
          AppendValue(flat_batch.column(sources[c]), e, &col.list_child());
          list.push_back(flat_rows[e][sources[c]]);
        }
        col.AppendListEnd();
        row.push_back(std::move(list));
      }
      rows.push_back(std::move(row));
    }
    std::string path = dir_ + "/" + name + ".parquet";
    auto out = LocalOutputStream::Create(path);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    auto w = Writer::Open(std::move(*out), schema, opts);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    ASSERT_TRUE((*w)->Write(batch).ok());
    auto m = (*w)->Close();
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    json expected;
    expected["columns"] = json::array();
    for (const auto& f : schema->fields) {
      expected["columns"].push_back({{"name", f.name},
                                     {"field_id", f.id},
                                     {"type", "list"},
                                     {"element_type", f.type.list().type.ToIceberg()},
                                     {"element_id", f.type.list().id},
                                     {"element_required", f.type.list().required},
                                     {"required", f.required}});
    }
    expected["rows"] = std::move(rows);
    expected["row_groups"] = m->split_offsets.size();
    expected["dictionary"] = dictionary;
    Check(path, expected, name);
  }

  void Check(const std::string& path, const json& expected, const std::string& name) {
    std::string expected_path = dir_ + "/" + name + ".json";
    std::ofstream(expected_path) << expected.dump();
    std::string cmd = "node " + ShellQuote(interop_dir_ + "/parquet_check.mjs") + " " +
                      ShellQuote(path) + " " + ShellQuote(expected_path) + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string output;
    char buf[4096];
    size_t got;
    while ((got = fread(buf, 1, sizeof(buf), p)) > 0) output.append(buf, got);
    int rc = pclose(p);
    std::printf("%s", output.c_str());
    EXPECT_EQ(rc, 0) << "parquet_check.mjs reported differences for " << path << ":\n" << output;
  }

  std::string interop_dir_;
  std::string dir_;
};

TEST_P(ParquetInteropTest, ListsOfEveryType) {
  WriterOptions opts;
  opts.compression = *ParseCompression(GetParam());
  opts.page_bytes = 4096;  // 300-element lists span pages
  WriteAndCheckLists("lists_" + GetParam(), opts, 600, "on");
  opts.dictionary = false;
  opts.row_group_bytes = 64 << 10;
  WriteAndCheckLists("lists_plain_" + GetParam(), opts, 600, "off");
}

TEST_P(ParquetInteropTest, AllTypesSmallFile) {
  WriterOptions opts;
  opts.compression = *ParseCompression(GetParam());
  WriteAndCheck("small_" + GetParam(), opts, 40, 40);
}

TEST_P(ParquetInteropTest, ManyPagesAndRowGroups) {
  WriterOptions opts;
  opts.compression = *ParseCompression(GetParam());
  opts.page_bytes = 4096;
  opts.row_group_bytes = 64 << 10;
  opts.key_value_metadata = {{"writer.test", "interop"}};
  // Row groups of a few hundred rows: after the first chunks of its nearly distinct columns,
  // the writer starts their next chunks PLAIN ("auto": a chunk has a dictionary or none).
  WriteAndCheck("many_" + GetParam(), opts, 5000, 777, /*min_row_groups=*/3, "auto");
}

TEST_P(ParquetInteropTest, NoDictionary) {
  WriterOptions opts;
  opts.compression = *ParseCompression(GetParam());
  opts.dictionary = false;
  WriteAndCheck("plain_small_" + GetParam(), opts, 40, 40, 1, "off");
  opts.page_bytes = 4096;
  opts.row_group_bytes = 64 << 10;
  WriteAndCheck("plain_many_" + GetParam(), opts, 5000, 777, /*min_row_groups=*/3, "off");
}

// Low cardinality: every column repeats 40 values; dictionaries never fall back.
TEST_P(ParquetInteropTest, LowCardinalityDictionaries) {
  WriterOptions opts;
  opts.compression = *ParseCompression(GetParam());
  opts.page_bytes = 2048;
  opts.row_group_bytes = 48 << 10;
  WriteAndCheck("lowcard_" + GetParam(), opts, 6000, 1000, /*min_row_groups=*/2, "on",
                /*cycle=*/40);
}

// Dictionaries of 1 KiB: every non-boolean column falls back to PLAIN mid-chunk.
TEST_P(ParquetInteropTest, DictionaryFallback) {
  WriterOptions opts;
  opts.compression = *ParseCompression(GetParam());
  opts.page_bytes = 4096;
  opts.dictionary_page_bytes = 1024;
  WriteAndCheck("fallback_" + GetParam(), opts, 5000, 777, 1, "fallback");
}

INSTANTIATE_TEST_SUITE_P(Codecs, ParquetInteropTest, ::testing::Values("zstd", "snappy", "none"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ferry::parquet
