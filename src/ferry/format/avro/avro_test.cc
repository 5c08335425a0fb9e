#include "ferry/format/avro/avro.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>

namespace ferry::avro {
namespace {

using nlohmann::json;

std::string ReadTestSchema(const std::string& name) {
  std::ifstream in(std::string(FERRY_SOURCE_DIR) + "/src/ferry/format/avro/testdata/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Encode(const std::function<void(Encoder&)>& fn) {
  Encoder e;
  fn(e);
  return e.buffer();
}

// Writes `n` datums, each encoded by `fn(encoder, i)`, and returns the file's bytes.
std::string WriteFile(const std::string& schema, Codec codec, int n,
                      const std::function<void(Encoder&, int)>& fn,
                      const std::map<std::string, std::string>& metadata = {}) {
  auto stream = std::make_unique<StringOutputStream>();
  StringOutputStream* raw = stream.get();
  auto w = ContainerWriter::Open(std::move(stream), schema, metadata, codec);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  if (!w.ok()) return "";
  for (int i = 0; i < n; ++i) {
    fn((*w)->datum(), i);
    EXPECT_TRUE((*w)->EndDatum().ok());
  }
  auto size = (*w)->Close();
  EXPECT_TRUE(size.ok()) << size.status().ToString();
  EXPECT_EQ(*size, raw->str().size());
  return raw->str();
}

// Builds a container file by hand, for inputs the writer never produces.
struct RawBlock {
  int64_t count;
  std::string data;
};
const std::string kSync = "0123456789abcdef";
std::string RawFile(const std::string& schema, const std::string& codec,
                    const std::vector<RawBlock>& blocks) {
  Encoder e;
  e.buffer().append("Obj\x01", 4);
  e.WriteBlockCount(2);
  e.WriteString("avro.schema");
  e.WriteBytes(schema);
  e.WriteString("avro.codec");
  e.WriteBytes(codec);
  e.WriteBlockCount(0);
  e.WriteFixed(kSync);
  for (const auto& b : blocks) {
    e.WriteLong(b.count);
    e.WriteBytes(b.data);
    e.WriteFixed(kSync);
  }
  return e.buffer();
}

size_t CountOccurrences(std::string_view hay, std::string_view needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string_view::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

void ExpectCorruption(std::string_view bytes, std::string_view message_part) {
  auto r = ReadContainer(bytes);
  ASSERT_FALSE(r.ok()) << "expected corruption containing '" << message_part << "'";
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << r.status().ToString();
  EXPECT_NE(r.status().message().find(message_part), std::string::npos) << r.status().ToString();
}

// ---------------------------------------------------------------------------------------------
// Encoder

TEST(AvroEncoderTest, ZigZagVarintsMatchTheSpec) {
  auto bytes = [](int64_t v) { return Encode([v](Encoder& e) { e.WriteLong(v); }); };
  EXPECT_EQ(bytes(0), std::string("\x00", 1));
  EXPECT_EQ(bytes(-1), "\x01");
  EXPECT_EQ(bytes(1), "\x02");
  EXPECT_EQ(bytes(-64), "\x7f");
  EXPECT_EQ(bytes(64), "\x80\x01");
  EXPECT_EQ(bytes(std::numeric_limits<int64_t>::max()), "\xfe\xff\xff\xff\xff\xff\xff\xff\xff\x01");
  EXPECT_EQ(bytes(std::numeric_limits<int64_t>::min()), "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01");
  EXPECT_EQ(Encode([](Encoder& e) { e.WriteInt(std::numeric_limits<int32_t>::min()); }),
            "\xff\xff\xff\xff\x0f");
}

TEST(AvroEncoderTest, PrimitivesUseLittleEndianAndLengthPrefixes) {
  EXPECT_EQ(Encode([](Encoder& e) { e.WriteFloat(1.0f); }), std::string("\x00\x00\x80\x3f", 4));
  EXPECT_EQ(Encode([](Encoder& e) { e.WriteDouble(-2.0); }),
            std::string("\x00\x00\x00\x00\x00\x00\x00\xc0", 8));
  EXPECT_EQ(Encode([](Encoder& e) { e.WriteString("foo"); }),
            "\x06"
            "foo");
  EXPECT_EQ(Encode([](Encoder& e) { e.WriteBytes(""); }), std::string("\x00", 1));
  EXPECT_EQ(Encode([](Encoder& e) {
              e.WriteBool(true);
              e.WriteBool(false);
            }),
            std::string("\x01\x00", 2));
}

// ---------------------------------------------------------------------------------------------
// Round trips, for both codecs

class AvroRoundTripTest : public ::testing::TestWithParam<Codec> {};

TEST_P(AvroRoundTripTest, LongEdgeCases) {
  const std::vector<int64_t> values = {0,
                                       -1,
                                       1,
                                       63,
                                       -64,
                                       64,
                                       std::numeric_limits<int32_t>::max(),
                                       std::numeric_limits<int64_t>::min(),
                                       std::numeric_limits<int64_t>::max()};
  std::string file = WriteFile("\"long\"", GetParam(), static_cast<int>(values.size()),
                               [&](Encoder& e, int i) { e.WriteLong(values[i]); });
  auto r = ReadContainer(file);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->records.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(r->records[i].get<int64_t>(), values[i]);
  EXPECT_EQ(r->metadata.at("avro.codec"), GetParam() == Codec::kDeflate ? "deflate" : "null");
  EXPECT_EQ(r->metadata.at("avro.schema"), "\"long\"");
}

TEST_P(AvroRoundTripTest, EveryTypeDecodesGenerically) {
  // Named types are defined once and referenced later, by short and by full name.
  const std::string schema = R"({"type":"record","name":"Outer","namespace":"a","fields":[
    {"name":"n","type":"null"},
    {"name":"b","type":"boolean"},
    {"name":"i","type":"int"},
    {"name":"l","type":{"type":"long","logicalType":"timestamp-micros"}},
    {"name":"f","type":"float"},
    {"name":"d","type":"double"},
    {"name":"by","type":"bytes"},
    {"name":"s","type":"string"},
    {"name":"fx","type":{"type":"fixed","name":"F2","size":2}},
    {"name":"fx2","type":"F2"},
    {"name":"fx3","type":"a.F2"},
    {"name":"e","type":{"type":"enum","name":"Color","namespace":"b","symbols":["RED","GREEN"]}},
    {"name":"e2","type":"b.Color"},
    {"name":"arr","type":{"type":"array","items":"int"}},
    {"name":"m","type":{"type":"map","values":"string"}},
    {"name":"u","type":["null","long","string"]},
    {"name":"u2","type":["null","long","string"]},
    {"name":"u3","type":["null","long","string"]},
    {"name":"inner","type":{"type":"record","name":"Inner","fields":[{"name":"x","type":"int"}]}},
    {"name":"inner2","type":"Inner"},
    {"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}}
  ]})";
  std::string file = WriteFile(schema, GetParam(), 1, [](Encoder& e, int) {
    e.WriteNull();
    e.WriteBool(true);
    e.WriteInt(-123456);
    e.WriteLong(1700000000000000);
    e.WriteFloat(1.5f);
    e.WriteDouble(-0.25);
    e.WriteBytes(std::string("\x00\xff\x7f", 3));
    e.WriteString("héllo");
    e.WriteFixed("ab");
    e.WriteFixed("cd");
    e.WriteFixed(std::string("\x00\x01", 2));
    e.WriteLong(1);  // GREEN
    e.WriteLong(0);  // RED
    e.WriteBlockCount(2);
    e.WriteInt(7);
    e.WriteInt(8);
    e.WriteBlockCount(-1);  // a negative count is followed by the block's byte size
    e.WriteLong(1);
    e.WriteInt(9);
    e.WriteBlockCount(0);
    e.WriteBlockCount(1);
    e.WriteString("k");
    e.WriteString("v");
    e.WriteBlockCount(0);
    e.WriteUnionIndex(0);
    e.WriteUnionIndex(1);
    e.WriteLong(-5);
    e.WriteUnionIndex(2);
    e.WriteString("str");
    e.WriteInt(11);
    e.WriteInt(12);
    e.WriteBytes("\x01\x02");
  });
  auto r = ReadContainer(file);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->records.size(), 1u);
  const json& v = r->records[0];
  const json expected = {
      {"n", nullptr},
      {"b", true},
      {"i", -123456},
      {"l", 1700000000000000},
      {"f", 1.5},
      {"d", -0.25},
      {"by", std::string("\x00\xff\x7f", 3)},
      {"s", "héllo"},
      {"fx", "ab"},
      {"fx2", "cd"},
      {"fx3", std::string("\x00\x01", 2)},
      {"e", "GREEN"},
      {"e2", "RED"},
      {"arr", {7, 8, 9}},
      {"m", {{"k", "v"}}},
      {"u", nullptr},
      {"u2", -5},
      {"u3", "str"},
      {"inner", {{"x", 11}}},
      {"inner2", {{"x", 12}}},
      {"dec", "\x01\x02"},
  };
  EXPECT_EQ(v, expected) << v.dump(-1, ' ', false, json::error_handler_t::replace);
  EXPECT_EQ(r->schema, json::parse(schema));
}

TEST_P(AvroRoundTripTest, FloatSpecialValues) {
  std::string file = WriteFile(R"(["float","double"])", GetParam(), 3, [](Encoder& e, int i) {
    if (i == 0) {
      e.WriteUnionIndex(0);
      e.WriteFloat(std::numeric_limits<float>::quiet_NaN());
    } else if (i == 1) {
      e.WriteUnionIndex(1);
      e.WriteDouble(-std::numeric_limits<double>::infinity());
    } else {
      e.WriteUnionIndex(1);
      e.WriteDouble(-0.0);
    }
  });
  auto r = ReadContainer(file);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->records.size(), 3u);
  EXPECT_TRUE(std::isnan(r->records[0].get<double>()));
  EXPECT_EQ(r->records[1].get<double>(), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::signbit(r->records[2].get<double>()));
}

TEST_P(AvroRoundTripTest, RecursiveRecordsThroughNamedReferences) {
  const std::string schema = R"({"type":"record","name":"ns.Node","fields":[
      {"name":"v","type":"int"},{"name":"next","type":["null","Node"]}]})";
  std::string file = WriteFile(schema, GetParam(), 1, [](Encoder& e, int) {
    for (int i = 0; i < 3; ++i) {
      e.WriteInt(i);
      e.WriteUnionIndex(i < 2 ? 1 : 0);
    }
  });
  auto r = ReadContainer(file);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->records.at(0), json::parse(R"({"v":0,"next":{"v":1,"next":{"v":2,"next":null}}})"));
}

TEST_P(AvroRoundTripTest, ManifestListKeepsSchemaMetadataAndValues) {
  const std::string schema = ReadTestSchema("manifest_list_v2.avsc");
  ASSERT_FALSE(schema.empty());
  const std::map<std::string, std::string> meta = {{"snapshot-id", "3051729675574597004"},
                                                   {"parent-snapshot-id", "null"},
                                                   {"sequence-number", "1"},
                                                   {"format-version", "2"}};
  std::string file = WriteFile(
      schema, GetParam(), 2,
      [](Encoder& e, int i) {
        e.WriteString("s3://bucket/t/metadata/abc-m" + std::to_string(i) + ".avro");
        e.WriteLong(6000 + i);  // manifest_length
        e.WriteInt(0);          // partition_spec_id
        e.WriteInt(0);          // content
        e.WriteLong(1);         // sequence_number
        e.WriteLong(1);         // min_sequence_number
        e.WriteLong(3051729675574597004);
        e.WriteInt(1);  // added_files_count
        e.WriteInt(0);
        e.WriteInt(0);
        e.WriteLong(100);  // added_rows_count
        e.WriteLong(0);
        e.WriteLong(0);
        if (i == 0) {
          e.WriteUnionIndex(1);  // partitions
          e.WriteBlockCount(1);
          e.WriteBool(false);    // contains_null
          e.WriteUnionIndex(0);  // contains_nan: null
          e.WriteUnionIndex(1);  // lower_bound
          e.WriteBytes(std::string("\x01\x00\x00\x00", 4));
          e.WriteUnionIndex(1);  // upper_bound
          e.WriteBytes(std::string("\x09\x00\x00\x00", 4));
          e.WriteBlockCount(0);
        } else {
          e.WriteUnionIndex(0);
        }
        e.WriteUnionIndex(0);  // key_metadata
      },
      meta);
  auto r = ReadContainer(file);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->metadata.at("avro.schema"), schema);  // verbatim, field-ids included
  for (const auto& [k, v] : meta) EXPECT_EQ(r->metadata.at(k), v) << k;
  EXPECT_EQ(r->schema["fields"][0]["field-id"], 500);
  ASSERT_EQ(r->records.size(), 2u);
  const json first = {
      {"manifest_path", "s3://bucket/t/metadata/abc-m0.avro"},
      {"manifest_length", 6000},
      {"partition_spec_id", 0},
      {"content", 0},
      {"sequence_number", 1},
      {"min_sequence_number", 1},
      {"added_snapshot_id", 3051729675574597004},
      {"added_files_count", 1},
      {"existing_files_count", 0},
      {"deleted_files_count", 0},
      {"added_rows_count", 100},
      {"existing_rows_count", 0},
      {"deleted_rows_count", 0},
      {"partitions",
       {{{"contains_null", false},
         {"contains_nan", nullptr},
         {"lower_bound", std::string("\x01\x00\x00\x00", 4)},
         {"upper_bound", std::string("\x09\x00\x00\x00", 4)}}}},
      {"key_metadata", nullptr},
  };
  EXPECT_EQ(r->records[0], first);
  EXPECT_EQ(r->records[1]["partitions"], nullptr);
  EXPECT_EQ(r->records[1]["manifest_length"], 6001);
}

TEST_P(AvroRoundTripTest, ManifestEntryWithMapsAsArraysOfRecords) {
  const std::string schema = ReadTestSchema("manifest_entry_v2.avsc");
  ASSERT_FALSE(schema.empty());
  std::string file = WriteFile(schema, GetParam(), 1,
                               [](Encoder& e, int) {
                                 e.WriteInt(1);  // status ADDED
                                 e.WriteUnionIndex(1);
                                 e.WriteLong(42);       // snapshot_id
                                 e.WriteUnionIndex(0);  // sequence_number: inherited
                                 e.WriteUnionIndex(0);  // file_sequence_number: inherited
                                 e.WriteInt(0);         // data_file.content
                                 e.WriteString("s3://bucket/t/data/00000-0.parquet");
                                 e.WriteString("parquet");
                                 e.WriteUnionIndex(1);  // partition.id_bucket
                                 e.WriteInt(3);
                                 e.WriteUnionIndex(1);  // partition.ts_day (date)
                                 e.WriteInt(19700);
                                 e.WriteLong(1000);     // record_count
                                 e.WriteLong(4096);     // file_size_in_bytes
                                 e.WriteUnionIndex(1);  // column_sizes
                                 e.WriteBlockCount(2);
                                 e.WriteInt(1);
                                 e.WriteLong(100);
                                 e.WriteInt(2);
                                 e.WriteLong(200);
                                 e.WriteBlockCount(0);
                                 e.WriteUnionIndex(0);  // value_counts
                                 e.WriteUnionIndex(0);  // null_value_counts
                                 e.WriteUnionIndex(0);  // nan_value_counts
                                 e.WriteUnionIndex(1);  // lower_bounds
                                 e.WriteBlockCount(1);
                                 e.WriteInt(1);
                                 e.WriteBytes(std::string("\x05\x00\x00\x00\x00\x00\x00\x00", 8));
                                 e.WriteBlockCount(0);
                                 e.WriteUnionIndex(0);  // upper_bounds
                                 e.WriteUnionIndex(0);  // key_metadata
                                 e.WriteUnionIndex(1);  // split_offsets
                                 e.WriteBlockCount(1);
                                 e.WriteLong(4);
                                 e.WriteBlockCount(0);
                                 e.WriteUnionIndex(0);  // equality_ids
                                 e.WriteUnionIndex(1);  // sort_order_id
                                 e.WriteInt(0);
                                 e.WriteUnionIndex(0);  // referenced_data_file
                               },
                               {{"schema", "{}"},
                                {"schema-id", "0"},
                                {"partition-spec", "[]"},
                                {"partition-spec-id", "0"},
                                {"format-version", "2"},
                                {"content", "data"}});
  auto r = ReadContainer(file);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->records.size(), 1u);
  const json& df = r->records[0]["data_file"];
  EXPECT_EQ(r->records[0]["status"], 1);
  EXPECT_EQ(r->records[0]["snapshot_id"], 42);
  EXPECT_EQ(r->records[0]["sequence_number"], nullptr);
  EXPECT_EQ(df["partition"], json::parse(R"({"id_bucket":3,"ts_day":19700})"));
  EXPECT_EQ(df["column_sizes"], json::parse(R"([{"key":1,"value":100},{"key":2,"value":200}])"));
  EXPECT_EQ(df["lower_bounds"][0]["value"], std::string("\x05\x00\x00\x00\x00\x00\x00\x00", 8));
  EXPECT_EQ(df["split_offsets"], json::parse("[4]"));
  EXPECT_EQ(df["sort_order_id"], 0);
  EXPECT_EQ(df["referenced_data_file"], nullptr);
  EXPECT_EQ(r->metadata.at("content"), "data");
}

TEST_P(AvroRoundTripTest, LargeFilesSpanManyBlocks) {
  const int n = 20000;
  std::string file = WriteFile(
      R"({"type":"record","name":"R","fields":[{"name":"id","type":"long"},
          {"name":"s","type":"string"}]})",
      GetParam(), n, [](Encoder& e, int i) {
        e.WriteLong(i);
        e.WriteString("row " + std::to_string(i) + std::string(40, 'x'));
      });
  // Every block ends with the header's sync marker, which is also the file's last 16 bytes.
  const size_t blocks = CountOccurrences(file, file.substr(file.size() - 16)) - 1;
  EXPECT_GE(blocks, 10u);
  auto r = ReadContainer(file);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->records.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; i += 997) {
    EXPECT_EQ(r->records[i]["id"], i);
    EXPECT_EQ(r->records[i]["s"], "row " + std::to_string(i) + std::string(40, 'x'));
  }
}

TEST_P(AvroRoundTripTest, EmptyFileHasAHeaderAndNoBlocks) {
  std::string file = WriteFile("\"string\"", GetParam(), 0, [](Encoder&, int) {});
  auto r = ReadContainer(file);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->records.empty());
  EXPECT_EQ(CountOccurrences(file, file.substr(file.size() - 16)), 1u);
}

// Every truncation of a valid file is either a shorter valid file (cut at a block boundary) or
// Corruption; never a crash or an out-of-bounds read (the test runs under ASan).
TEST_P(AvroRoundTripTest, EveryTruncationIsDetected) {
  std::string file = WriteFile(R"(["null","string"])", GetParam(), 300, [](Encoder& e, int i) {
    e.WriteUnionIndex(1);
    e.WriteString(std::string(static_cast<size_t>(i % 50), 'a' + i % 26));
  });
  for (size_t len = 0; len < file.size(); ++len) {
    auto r = ReadContainer(std::string_view(file).substr(0, len));
    if (r.ok()) {
      EXPECT_LT(r->records.size(), 300u) << len;
    } else {
      EXPECT_EQ(r.status().code(), StatusCode::kCorruption) << len << ": " << r.status().ToString();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Codecs, AvroRoundTripTest,
                         ::testing::Values(Codec::kNull, Codec::kDeflate), [](const auto& info) {
                           return info.param == Codec::kNull ? "Null" : "Deflate";
                         });

// ---------------------------------------------------------------------------------------------
// Writer contract

TEST(AvroWriterTest, RejectsBadSchemasAndReservedKeys) {
  auto open = [](const std::string& schema, std::map<std::string, std::string> meta = {}) {
    return ContainerWriter::Open(std::make_unique<StringOutputStream>(), schema, meta).status();
  };
  EXPECT_EQ(open("{not json").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(open(R"({"type":"record","name":"R","fields":[{"name":"x","type":"Nope"}]})").code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(open("\"int\"", {{"avro.codec", "snappy"}}).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(open("\"int\"", {{"format-version", "2"}}).ok());
}

TEST(AvroWriterTest, CloseTwiceAndDatumAfterCloseAreErrors) {
  auto w = ContainerWriter::Open(std::make_unique<StringOutputStream>(), "\"int\"", {});
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->Close().ok());
  EXPECT_FALSE((*w)->Close().ok());
  (*w)->datum().WriteInt(1);
  EXPECT_FALSE((*w)->EndDatum().ok());
}

TEST(AvroWriterTest, SyncMarkersDifferBetweenFiles) {
  auto one = [] {
    return WriteFile("\"int\"", Codec::kNull, 1, [](Encoder& e, int) { e.WriteInt(1); });
  };
  std::string a = one(), b = one();
  EXPECT_NE(a.substr(a.size() - 16), b.substr(b.size() - 16));
}

// ---------------------------------------------------------------------------------------------
// Corruption

TEST(AvroCorruptionTest, BadMagic) {
  std::string file = WriteFile("\"int\"", Codec::kNull, 1, [](Encoder& e, int) { e.WriteInt(1); });
  file[3] = '\x02';
  ExpectCorruption(file, "bad magic");
  ExpectCorruption("", "bad magic");
  ExpectCorruption("Obj", "bad magic");
}

TEST(AvroCorruptionTest, BadSyncMarker) {
  for (Codec codec : {Codec::kNull, Codec::kDeflate}) {
    std::string file = WriteFile("\"int\"", codec, 1, [](Encoder& e, int) { e.WriteInt(1); });
    file.back() ^= 0x01;
    ExpectCorruption(file, "sync marker does not match");
  }
}

TEST(AvroCorruptionTest, TruncatedBlock) {
  std::string file =
      WriteFile("\"string\"", Codec::kNull, 1, [](Encoder& e, int) { e.WriteString("hello"); });
  ExpectCorruption(std::string_view(file).substr(0, file.size() - 20), "remain (truncated file?)");
  ExpectCorruption(std::string_view(file).substr(0, file.size() - 3), "before the block's sync");
}

TEST(AvroCorruptionTest, BadDeflateData) {
  ExpectCorruption(RawFile("\"int\"", "deflate", {{1, "\xff\xff\xff\xff"}}),
                   "invalid deflate data");
  // A valid deflate stream cut short.
  std::string file =
      WriteFile("\"string\"", Codec::kDeflate, 1, [](Encoder& e, int) { e.WriteString("hello"); });
  const std::string sync = file.substr(file.size() - 16);
  const size_t header_end = file.find(sync) + 16;
  ASSERT_EQ(file[header_end], '\x02');  // one record
  const auto size = static_cast<size_t>(static_cast<uint8_t>(file[header_end + 1]) >> 1);
  std::string deflated = file.substr(header_end + 2, size);
  ExpectCorruption(RawFile("\"string\"", "deflate", {{1, deflated.substr(0, deflated.size() - 2)}}),
                   "deflate data ends");
  ASSERT_TRUE(ReadContainer(RawFile("\"string\"", "deflate", {{1, deflated}})).ok());
}

TEST(AvroCorruptionTest, DatumsThatDoNotMatchTheSchema) {
  ExpectCorruption(RawFile(R"(["null","int"])", "null", {{1, "\x04"}}), "union index 2");
  ExpectCorruption(RawFile("\"int\"", "null", {{1, "\xff\xff\xff\xff\x1f"}}),
                   "does not fit 32 bits");
  ExpectCorruption(RawFile("\"string\"", "null", {{1, "\x01"}}), "negative length");
  ExpectCorruption(RawFile("\"string\"", "null",
                           {{1,
                             "\x7e"
                             "ab"}}),
                   "needs 63 bytes");
  ExpectCorruption(RawFile("\"boolean\"", "null", {{1, "\x02"}}), "neither 0 nor 1");
  ExpectCorruption(RawFile(R"({"type":"enum","name":"E","symbols":["A"]})", "null", {{1, "\x02"}}),
                   "enum 'E' index 1");
  ExpectCorruption(RawFile("\"long\"", "null", {{1, std::string(11, '\xff')}}),
                   "varint overflows 64 bits");
  ExpectCorruption(RawFile("\"long\"", "null", {{1, std::string(9, '\xff') + "\x81" + '\0'}}),
                   "varint longer than 10 bytes");
  ExpectCorruption(RawFile("\"int\"", "null", {{1, "\x02\x04"}}), "1 bytes left after its 1");
  ExpectCorruption(RawFile("\"int\"", "null", {{2, "\x02"}}), "record 1");
  ExpectCorruption(RawFile(R"({"type":"record","name":"R","fields":[{"name":"a","type":"int"},
                              {"name":"b","type":"string"}]})",
                           "null", {{1, "\x02\x09"}}),
                   "field 'b'");
}

TEST(AvroCorruptionTest, HugeCountsOfZeroWidthValuesAreBounded) {
  ExpectCorruption(RawFile("\"null\"", "null", {{int64_t{1} << 60, ""}}), "take no bytes");
  Encoder arr;
  arr.WriteLong(int64_t{1} << 60);  // an array block of 2^60 nulls
  ExpectCorruption(RawFile(R"({"type":"array","items":"null"})", "null", {{1, arr.buffer()}}),
                   "take no bytes");
  Encoder ints;
  ints.WriteLong(int64_t{1} << 60);  // 2^60 ints with only a few bytes behind them
  ints.WriteInt(1);
  ExpectCorruption(RawFile(R"({"type":"array","items":"int"})", "null", {{1, ints.buffer()}}),
                   "input ends inside a varint");
}

TEST(AvroCorruptionTest, DeepRecursionIsBounded) {
  const std::string schema =
      R"({"type":"record","name":"N","fields":[{"name":"next","type":["null","N"]}]})";
  ExpectCorruption(RawFile(schema, "null", {{1, std::string(1000, '\x02') + '\x00'}}),
                   "deeper than");
  std::string nested = "\"int\"";
  for (int i = 0; i < 500; ++i) nested = R"({"type":"array","items":)" + nested + "}";
  ExpectCorruption(RawFile(nested, "null", {}), "schema nests deeper than");
}

TEST(AvroCorruptionTest, BadHeaders) {
  ExpectCorruption(RawFile("{", "null", {}), "not JSON");
  ExpectCorruption(RawFile(R"({"type":"record","name":"R"})", "null", {}), "no \"fields\"");
  ExpectCorruption(RawFile("\"Missing\"", "null", {}), "unknown type 'Missing'");
  ExpectCorruption(RawFile("\"int\"", "lzma-ish", {}), "unknown Avro codec");
  auto snappy = ReadContainer(RawFile("\"int\"", "snappy", {}));
  EXPECT_EQ(snappy.status().code(), StatusCode::kNotSupported);
  std::string file = RawFile("\"int\"", "null", {});
  ExpectCorruption(std::string_view(file).substr(0, 10), "header metadata");
  ExpectCorruption(std::string_view(file).substr(0, file.size() - 1), "header sync marker");
  Encoder no_schema;
  no_schema.buffer().append("Obj\x01", 4);
  no_schema.WriteBlockCount(0);
  no_schema.WriteFixed(kSync);
  ExpectCorruption(no_schema.buffer(), "no avro.schema");
}

}  // namespace
}  // namespace ferry::avro
