// Interop: files written by ContainerWriter are read back by avsc (an independent JavaScript
// implementation) through tests/interop/avro_check.mjs, which also checks that every Iceberg
// field keeps its "field-id" in the header schema. Skips when node or node_modules is missing.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "ferry/format/avro/avro.h"

namespace ferry::avro {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::string kRepo = FERRY_SOURCE_DIR;
const std::string kInterop = kRepo + "/tests/interop";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Hex(std::string_view raw) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (char c : raw) {
    out.push_back(kDigits[static_cast<uint8_t>(c) >> 4]);
    out.push_back(kDigits[static_cast<uint8_t>(c) & 0xf]);
  }
  return out;
}

std::string Unhex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

// Encodes `value` (in avro_check.mjs's expected.json conventions: bytes/fixed as hex, longs
// beyond 2^53 as decimal strings, unions unwrapped) by `schema`. Test schemas only: a union
// takes its "null" branch for null and its first other branch otherwise.
class JsonEncoder {
 public:
  void Encode(const json& schema, const json& value, Encoder& e) {
    if (schema.is_array()) {
      for (size_t i = 0; i < schema.size(); ++i) {
        const bool is_null = schema[i] == "null";
        if (is_null == value.is_null()) {
          e.WriteUnionIndex(static_cast<int64_t>(i));
          Encode(schema[i], value, e);
          return;
        }
      }
      FAIL() << "no union branch for " << value;
    }
    const std::string type =
        schema.is_string() ? schema.get<std::string>() : schema.at("type").get<std::string>();
    if (schema.is_object() && schema.contains("name")) named_[schema["name"]] = schema;
    if (type == "null") return;
    if (type == "boolean") return e.WriteBool(value.get<bool>());
    if (type == "int") return e.WriteInt(value.get<int32_t>());
    if (type == "long") {
      return e.WriteLong(value.is_string() ? std::stoll(value.get<std::string>())
                                           : value.get<int64_t>());
    }
    if (type == "float") return e.WriteFloat(value.get<float>());
    if (type == "double") return e.WriteDouble(value.get<double>());
    if (type == "string") return e.WriteString(value.get<std::string>());
    if (type == "bytes") return e.WriteBytes(Unhex(value.get<std::string>()));
    if (type == "fixed") return e.WriteFixed(Unhex(value.get<std::string>()));
    if (type == "enum") {
      const auto& symbols = schema["symbols"];
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (symbols[i] == value) return e.WriteLong(static_cast<int64_t>(i));
      }
      FAIL() << "no enum symbol " << value;
    }
    if (type == "array") {
      if (!value.empty()) e.WriteBlockCount(static_cast<int64_t>(value.size()));
      for (const auto& item : value) Encode(schema["items"], item, e);
      return e.WriteBlockCount(0);
    }
    if (type == "map") {
      if (!value.empty()) e.WriteBlockCount(static_cast<int64_t>(value.size()));
      for (const auto& [k, v] : value.items()) {
        e.WriteString(k);
        Encode(schema["values"], v, e);
      }
      return e.WriteBlockCount(0);
    }
    if (type == "record") {
      for (const auto& f : schema["fields"])
        Encode(f["type"], value.at(f["name"].get<std::string>()), e);
      return;
    }
    ASSERT_TRUE(named_.contains(type)) << "unknown type " << type;
    Encode(named_[type], value, e);
  }

 private:
  std::map<std::string, json> named_;
};

class AvroInteropTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("node --version > /dev/null 2>&1") != 0) {
      if (std::getenv("FERRY_REQUIRE_INTEROP") != nullptr) {
        GTEST_FAIL() << "node is not installed (needed to run tests/interop/avro_check.mjs)";
      }
      GTEST_SKIP() << "node is not installed (needed to run tests/interop/avro_check.mjs)";
    }
    if (!fs::exists(kInterop + "/node_modules/avsc")) {
      if (std::getenv("FERRY_REQUIRE_INTEROP") != nullptr) {
        GTEST_FAIL() << kInterop << "/node_modules/avsc is missing: run `npm install` in "
                     << kInterop;
      }
      GTEST_SKIP() << kInterop << "/node_modules/avsc is missing: run `npm install` in "
                   << kInterop;
    }
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("ferry_avro_interop_" + std::to_string(getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    // Kept on failure, or always with FERRY_KEEP_INTEROP_FILES=1, for a look by hand.
    if (!dir_.empty() && !HasFailure() && std::getenv("FERRY_KEEP_INTEROP_FILES") == nullptr) {
      fs::remove_all(dir_);
    }
  }

  // Writes `records` (expected.json conventions) with ContainerWriter into <name>.avro and the
  // expectation into <name>.expected.json; returns the .avro path.
  std::string Write(const std::string& name, const std::string& schema_text,
                    const std::map<std::string, std::string>& metadata, const json& records,
                    Codec codec) {
    const std::string path = (dir_ / (name + ".avro")).string();
    auto out = LocalOutputStream::Create(path);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    if (!out.ok()) return path;
    auto w = ContainerWriter::Open(std::move(out).value(), schema_text, metadata, codec);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    if (!w.ok()) return path;
    JsonEncoder enc;
    const json schema = json::parse(schema_text);
    for (const auto& r : records) {
      enc.Encode(schema, r, (*w)->datum());
      EXPECT_TRUE((*w)->EndDatum().ok());
    }
    auto size = (*w)->Close();
    EXPECT_TRUE(size.ok()) << size.status().ToString();
    json expected = {{"metadata", metadata}, {"records", records}};
    expected["metadata"]["avro.codec"] = codec == Codec::kDeflate ? "deflate" : "null";
    std::ofstream(dir_ / (name + ".expected.json")) << expected.dump(1);
    return path;
  }

  // Runs the checker; returns its exit code and leaves its output in `output`.
  int Check(const std::string& avro_path, const std::string& expected_path, std::string* output) {
    const std::string log = avro_path + ".log";
    const std::string cmd = "node '" + kInterop + "/avro_check.mjs' '" + avro_path + "' " +
                            (expected_path.empty() ? "" : "'" + expected_path + "'") + " > '" +
                            log + "' 2>&1";
    int rc = std::system(cmd.c_str());
    *output = ReadFile(log);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  }

  std::string ExpectedPath(const std::string& name) {
    return (dir_ / (name + ".expected.json")).string();
  }

  fs::path dir_;
};

const char* kAllTypesSchema = R"({"type":"record","name":"AllTypes","namespace":"ferry.test",
  "fields":[
    {"name":"b","type":"boolean"},
    {"name":"i","type":"int"},
    {"name":"l","type":"long"},
    {"name":"f","type":"float"},
    {"name":"d","type":"double"},
    {"name":"by","type":"bytes"},
    {"name":"s","type":"string"},
    {"name":"fx","type":{"type":"fixed","name":"F4","size":4}},
    {"name":"e","type":{"type":"enum","name":"Color","symbols":["RED","GREEN","BLUE"]}},
    {"name":"arr","type":{"type":"array","items":"long"}},
    {"name":"m","type":{"type":"map","values":"int"}},
    {"name":"u","type":["null","string"]},
    {"name":"nested","type":{"type":"record","name":"Nested","fields":[
      {"name":"x","type":"int"},{"name":"fx2","type":"F4"}]}},
    {"name":"date","type":{"type":"int","logicalType":"date"}}
  ]})";

json AllTypesRecord(int i) {
  const int64_t big[] = {0, -1, std::numeric_limits<int64_t>::min(),
                         std::numeric_limits<int64_t>::max(), int64_t{1} << 53};
  const int64_t l = big[i % 5] + (i % 5 < 2 ? i : 0);
  const bool safe = l >= -((int64_t{1} << 53) - 1) && l <= (int64_t{1} << 53) - 1;
  json row = {
      {"b", i % 2 == 0},
      {"i", i % 3 == 0 ? std::numeric_limits<int32_t>::min() + i : i * 1000},
      {"l", safe ? json(l) : json(std::to_string(l))},
      {"f", static_cast<double>(0.5f * static_cast<float>(i))},
      {"d", i * 0.25 - 7},
      {"by", Hex(std::string("\x00\xff", 2) + std::to_string(i))},
      {"s", "row " + std::to_string(i) + " é"},
      {"fx", Hex(std::string("\xde\xad\x00", 3) + static_cast<char>(i & 0x7f))},
      {"e", json::array({"RED", "GREEN", "BLUE"})[i % 3]},
      {"arr", i % 4 == 0 ? json::array() : json::array({i, -i, 7})},
      {"m", i % 4 == 1 ? json::object() : json{{"a", i}, {"b", -i}}},
      {"u", i % 2 == 0 ? json(nullptr) : json("u" + std::to_string(i))},
      {"nested", {{"x", -i}, {"fx2", "00000001"}}},
      {"date", 19000 + i},
  };
  return row;
}

TEST_F(AvroInteropTest, AllTypesBothCodecsManyBlocks) {
  json records = json::array();
  for (int i = 0; i < 2000; ++i) records.push_back(AllTypesRecord(i));
  for (Codec codec : {Codec::kNull, Codec::kDeflate}) {
    const std::string name = codec == Codec::kNull ? "all_null" : "all_deflate";
    std::string path = Write(name, kAllTypesSchema, {{"writer", "ferry"}}, records, codec);
    // The same file reads back through ferry's own reader too.
    auto own = ReadContainer(ReadFile(path));
    ASSERT_TRUE(own.ok()) << own.status().ToString();
    ASSERT_EQ(own->records.size(), records.size());
    std::string out;
    EXPECT_EQ(Check(path, ExpectedPath(name), &out), 0) << out;
    EXPECT_NE(out.find("records: 2000"), std::string::npos) << out;
    EXPECT_NE(out.find("metadata keys: avro.codec, avro.schema, writer"), std::string::npos) << out;
  }
}

json ManifestListRecords() {
  json records = json::array();
  for (int i = 0; i < 3; ++i) {
    records.push_back({
        {"manifest_path", "s3://bucket/db/t/metadata/0b4c-m" + std::to_string(i) + ".avro"},
        {"manifest_length", 7000 + i},
        {"partition_spec_id", 0},
        {"content", i == 2 ? 1 : 0},
        {"sequence_number", 4},
        {"min_sequence_number", 3},
        {"added_snapshot_id", "3051729675574597004"},  // above 2^53: a string by convention
        {"added_files_count", 1},
        {"existing_files_count", i},
        {"deleted_files_count", 0},
        {"added_rows_count", 1000},
        {"existing_rows_count", 0},
        {"deleted_rows_count", 0},
        {"partitions", i == 1 ? json(nullptr)
                              : json::array({{{"contains_null", false},
                                              {"contains_nan", nullptr},
                                              {"lower_bound", "01000000"},
                                              {"upper_bound", "09000000"}}})},
        {"key_metadata", nullptr},
    });
  }
  return records;
}

TEST_F(AvroInteropTest, ManifestListKeepsFieldIdsAndMetadata) {
  const std::string schema =
      ReadFile(kRepo + "/src/ferry/format/avro/testdata/manifest_list_v2.avsc");
  ASSERT_FALSE(schema.empty());
  const std::map<std::string, std::string> meta = {{"snapshot-id", "3051729675574597004"},
                                                   {"parent-snapshot-id", "null"},
                                                   {"sequence-number", "4"},
                                                   {"format-version", "2"}};
  for (Codec codec : {Codec::kNull, Codec::kDeflate}) {
    const std::string name = codec == Codec::kNull ? "snap_null" : "snap_deflate";
    std::string path = Write(name, schema, meta, ManifestListRecords(), codec);
    std::string out;
    EXPECT_EQ(Check(path, ExpectedPath(name), &out), 0) << out;
    EXPECT_NE(out.find("schema fields: 19, with field-id: 19"), std::string::npos) << out;
  }
}

TEST_F(AvroInteropTest, ManifestEntryKeepsFieldIds) {
  const std::string schema =
      ReadFile(kRepo + "/src/ferry/format/avro/testdata/manifest_entry_v2.avsc");
  ASSERT_FALSE(schema.empty());
  json data_file = {
      {"content", 0},
      {"file_path", "s3://bucket/db/t/data/id_bucket=3/00000-0-a.parquet"},
      {"file_format", "parquet"},
      {"partition", {{"id_bucket", 3}, {"ts_day", 19700}}},
      {"record_count", 1000},
      {"file_size_in_bytes", 40960},
      {"column_sizes", json::array({{{"key", 1}, {"value", 100}}, {{"key", 2}, {"value", 200}}})},
      {"value_counts", json::array({{{"key", 1}, {"value", 1000}}})},
      {"null_value_counts", json::array({{{"key", 1}, {"value", 0}}})},
      {"nan_value_counts", nullptr},
      {"lower_bounds", json::array({{{"key", 1}, {"value", "0100000000000000"}}})},
      {"upper_bounds", json::array({{{"key", 1}, {"value", "e803000000000000"}}})},
      {"key_metadata", nullptr},
      {"split_offsets", json::array({4})},
      {"equality_ids", nullptr},
      {"sort_order_id", 0},
      {"referenced_data_file", nullptr},
  };
  json records = json::array({{{"status", 1},
                               {"snapshot_id", 42},
                               {"sequence_number", nullptr},
                               {"file_sequence_number", nullptr},
                               {"data_file", data_file}}});
  const std::map<std::string, std::string> meta = {
      {"schema", R"({"type":"struct","schema-id":0,"fields":[]})"},
      {"schema-id", "0"},
      {"partition-spec", "[]"},
      {"partition-spec-id", "0"},
      {"format-version", "2"},
      {"content", "data"}};
  std::string path = Write("manifest", schema, meta, records, Codec::kDeflate);
  std::string out;
  EXPECT_EQ(Check(path, ExpectedPath("manifest"), &out), 0) << out;
}

// The checker must be able to fail: a wrong expected value and a lost field-id are reported.
TEST_F(AvroInteropTest, CheckerReportsDifferencesAndMissingFieldIds) {
  json records = ManifestListRecords();
  std::string schema = ReadFile(kRepo + "/src/ferry/format/avro/testdata/manifest_list_v2.avsc");
  std::string path = Write("wrong", schema, {{"format-version", "2"}}, records, Codec::kDeflate);
  json expected = json::parse(ReadFile(ExpectedPath("wrong")));
  expected["records"][1]["manifest_length"] = 1;
  std::ofstream(ExpectedPath("wrong")) << expected.dump();
  std::string out;
  EXPECT_EQ(Check(path, ExpectedPath("wrong"), &out), 1) << out;
  EXPECT_NE(out.find("records[1].manifest_length"), std::string::npos) << out;

  json no_id = json::parse(schema);
  no_id["fields"][3].erase("field-id");
  path = Write("no_id", no_id.dump(), {{"format-version", "2"}}, records, Codec::kNull);
  EXPECT_EQ(Check(path, "", &out), 1) << out;
  EXPECT_NE(out.find("schema field content has no \"field-id\""), std::string::npos) << out;
}

}  // namespace
}  // namespace ferry::avro
