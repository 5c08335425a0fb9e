#include "ferry/format/parquet/thrift_compact.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ferry/format/parquet/parquet_test_util.h"

namespace ferry::parquet::thrift {
namespace {

using testing::Bytes;

TEST(ThriftCompactTest, ShortFieldHeadersUseDeltas) {
  std::string out;
  CompactWriter w(&out);
  w.BeginStruct();
  w.I32Field(1, 1);        // 0x15 (delta 1, i32), zigzag(1) = 2
  w.I32Field(2, -1);       // 0x15, zigzag(-1) = 1
  w.I64Field(3, 300);      // 0x16, zigzag(300) = 600 = 0xD8 0x04
  w.BinaryField(4, "ab");  // 0x18, len 2, 'a' 'b'
  w.BoolField(5, true);    // 0x11
  w.BoolField(6, false);   // 0x12
  w.I32Field(9, 3);        // delta 3: 0x35, zigzag(3) = 6
  w.EndStruct();           // 0x00
  EXPECT_EQ(out, Bytes({0x15, 0x02, 0x15, 0x01, 0x16, 0xD8, 0x04, 0x18, 0x02, 'a', 'b', 0x11, 0x12,
                        0x35, 0x06, 0x00}));
}

TEST(ThriftCompactTest, LongFieldHeaderWhenDeltaTooLargeOrNegative) {
  std::string out;
  CompactWriter w(&out);
  w.BeginStruct();
  w.I32Field(1, 0);   // 0x15 0x00
  w.I32Field(20, 5);  // delta 19 > 15: 0x05, zigzag(20) = 40 = 0x28, then 0x0A
  w.I32Field(3, 7);   // negative delta: 0x05, zigzag(3) = 6, then 0x0E
  w.I16Field(4, -2);  // delta 1, i16: 0x14, zigzag(-2) = 3
  w.EndStruct();
  EXPECT_EQ(out, Bytes({0x15, 0x00, 0x05, 0x28, 0x0A, 0x05, 0x06, 0x0E, 0x14, 0x03, 0x00}));
}

TEST(ThriftCompactTest, VarintsAndZigZagExtremes) {
  EXPECT_EQ(CompactWriter::ZigZag32(0), 0u);
  EXPECT_EQ(CompactWriter::ZigZag32(-1), 1u);
  EXPECT_EQ(CompactWriter::ZigZag32(1), 2u);
  EXPECT_EQ(CompactWriter::ZigZag32(INT32_MIN), 0xFFFFFFFFu);
  EXPECT_EQ(CompactWriter::ZigZag64(INT64_MAX), 0xFFFFFFFFFFFFFFFEull);
  EXPECT_EQ(CompactWriter::ZigZag64(INT64_MIN), 0xFFFFFFFFFFFFFFFFull);
  std::string out;
  CompactWriter w(&out);
  w.I64(INT64_MIN);  // ten bytes: nine 0xFF then 0x01
  EXPECT_EQ(out, Bytes({0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}));
  out.clear();
  w.Varint(127);
  w.Varint(128);
  EXPECT_EQ(out, Bytes({0x7F, 0x80, 0x01}));
}

TEST(ThriftCompactTest, ListsAndNestedStructs) {
  std::string out;
  CompactWriter w(&out);
  w.BeginStruct();
  w.ListField(2, kI32, 2);  // 0x29, list header 0x25 (size 2, i32)
  w.I32(0);
  w.I32(3);
  w.StructField(3);             // 0x1C: delta 1 from 2, struct
  w.I32Field(1, 1);             // nested ids restart: 0x15 0x02
  w.EndStruct();                // 0x00
  w.I32Field(4, 2);             // back in the outer struct, last id 3: 0x15 0x04
  w.ListField(5, kBinary, 16);  // 0x19, 0xF8 then varint 16
  for (int i = 0; i < 16; ++i) w.Binary("");
  w.EndStruct();
  std::string want =
      Bytes({0x29, 0x25, 0x00, 0x06, 0x1C, 0x15, 0x02, 0x00, 0x15, 0x04, 0x19, 0xF8, 0x10});
  want += std::string(16, '\0');
  want += Bytes({0x00});
  EXPECT_EQ(out, want);
}

// A PageHeader as parquet.thrift defines it, checked byte by byte.
TEST(ThriftCompactTest, DataPageHeaderBytes) {
  std::string out;
  CompactWriter w(&out);
  w.BeginStruct();
  w.I32Field(1, 0);    // type DATA_PAGE: 0x15 0x00
  w.I32Field(2, 100);  // uncompressed_page_size: 0x15 0xC8 0x01
  w.I32Field(3, 64);   // compressed_page_size: 0x15 0x80 0x01
  w.StructField(5);    // data_page_header: 0x2C
  w.I32Field(1, 10);   // num_values: 0x15 0x14
  w.I32Field(2, 0);    // PLAIN: 0x15 0x00
  w.I32Field(3, 3);    // RLE: 0x15 0x06
  w.I32Field(4, 3);    // RLE: 0x15 0x06
  w.EndStruct();
  w.EndStruct();
  EXPECT_EQ(out, Bytes({0x15, 0x00, 0x15, 0xC8, 0x01, 0x15, 0x80, 0x01, 0x2C, 0x15, 0x14, 0x15,
                        0x00, 0x15, 0x06, 0x15, 0x06, 0x00, 0x00}));
  EXPECT_EQ(w.depth(), 0);
}

TEST(ThriftCompactTest, RoundTripThroughIndependentDecoder) {
  std::string out;
  CompactWriter w(&out);
  w.BeginStruct();
  w.I32Field(1, -123456);
  w.I64Field(2, INT64_MIN);
  w.BinaryField(17, std::string(300, 'z'));
  w.ListField(18, kStruct, 20);
  for (int i = 0; i < 20; ++i) {
    w.BeginStruct();
    w.I64Field(1, i * 1000000007LL);
    w.BoolField(2, i % 2 == 0);
    w.EndStruct();
  }
  w.EndStruct();
  testing::CompactReader r(out.data(), out.size());
  testing::TValue v = r.ReadStruct();
  EXPECT_EQ(r.pos(), out.size());
  EXPECT_EQ(v[1].i, -123456);
  EXPECT_EQ(v[2].i, INT64_MIN);
  EXPECT_EQ(v[17].bin, std::string(300, 'z'));
  ASSERT_EQ(v[18].list.size(), 20u);
  EXPECT_EQ(v[18].list[19][1].i, 19 * 1000000007LL);
  EXPECT_EQ(v[18].list[19][2].b, false);
  EXPECT_EQ(v[18].list[4][2].b, true);
}

// The decoder (thrift::CompactReader) reads back what the encoder writes, skips what it is not
// asked for, and turns every truncation into an error instead of reading past the end.
std::string SampleStruct() {
  std::string out;
  CompactWriter w(&out);
  w.BeginStruct();
  w.I32Field(1, -123456);
  w.I64Field(2, INT64_MIN);
  w.BoolField(3, true);
  w.BinaryField(17, std::string(300, 'z'));
  w.ListField(18, kStruct, 20);
  for (int i = 0; i < 20; ++i) {
    w.BeginStruct();
    w.I64Field(1, i * 1000000007LL);
    w.BoolField(2, i % 2 == 0);
    w.EndStruct();
  }
  w.StructField(19);
  w.I16Field(1, -2);
  w.EndStruct();
  w.I32Field(20, 7);
  w.EndStruct();
  return out;
}

TEST(ThriftCompactTest, DecoderReadsWhatTheEncoderWrites) {
  const std::string in = SampleStruct();
  CompactReader r(in);
  r.BeginStruct();
  int16_t id;
  CType t;
  std::vector<int16_t> ids;
  int64_t sum = 0;
  while (r.NextField(&id, &t)) {
    ids.push_back(id);
    if (id == 1) {
      EXPECT_EQ(r.I32(), -123456);
    } else if (id == 2) {
      EXPECT_EQ(r.I64(), INT64_MIN);
    } else if (id == 3) {
      EXPECT_TRUE(CompactReader::BoolField(t));
    } else if (id == 17) {
      EXPECT_EQ(r.Binary(), std::string(300, 'z'));
    } else if (id == 18) {
      CType et;
      uint32_t n;
      ASSERT_TRUE(r.ListHeader(&et, &n));
      EXPECT_EQ(et, kStruct);
      ASSERT_EQ(n, 20u);
      for (uint32_t i = 0; i < n; ++i) {
        r.BeginStruct();
        int16_t id2;
        CType t2;
        while (r.NextField(&id2, &t2)) {
          if (id2 == 1) {
            sum += r.I64();
          } else {
            r.Skip(t2);
          }
        }
      }
    } else {
      r.Skip(t);  // 19: a struct nobody asked for
    }
  }
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r.pos(), in.size());
  EXPECT_EQ(ids, (std::vector<int16_t>{1, 2, 3, 17, 18, 19, 20}));
  EXPECT_EQ(sum, 190 * 1000000007LL);
}

TEST(ThriftCompactTest, DecoderFailsCleanlyOnEveryTruncation) {
  const std::string in = SampleStruct();
  for (size_t len = 0; len < in.size(); ++len) {
    CompactReader r(std::string_view(in).substr(0, len));
    r.Skip(kStruct);
    EXPECT_FALSE(r.ok()) << "a struct cut at " << len << " bytes was read";
    EXPECT_LE(r.pos(), len);
  }
  // A list claiming more elements than there are bytes is refused before anything is allocated.
  const std::string huge = Bytes({0x19, 0xFC, 0xFF, 0xFF, 0xFF, 0x0F});
  CompactReader r(huge);
  r.BeginStruct();
  int16_t id;
  CType t;
  ASSERT_TRUE(r.NextField(&id, &t));
  CType et;
  uint32_t n;
  EXPECT_FALSE(r.ListHeader(&et, &n));
  EXPECT_NE(r.error().find("runs past the end"), std::string::npos) << r.error();
  // Nesting deeper than the limit is an error, not a stack overflow.
  std::string deep;
  for (int i = 0; i < 10000; ++i) deep.push_back(static_cast<char>(0x1C));  // field 1: struct
  CompactReader d(deep);
  d.Skip(kStruct);
  EXPECT_FALSE(d.ok());
}

}  // namespace
}  // namespace ferry::parquet::thrift
