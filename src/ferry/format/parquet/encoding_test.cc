#include "ferry/format/parquet/encoding.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "ferry/format/parquet/parquet_test_util.h"

namespace ferry::parquet::internal {
namespace {

using testing::Bytes;

std::string Encode(const std::vector<uint8_t>& levels, size_t zeros_hint) {
  ByteBuffer b;
  EncodeLevelsBitWidth1(levels.data(), levels.size(), zeros_hint, &b);
  return std::string(b.view());
}

size_t Zeros(const std::vector<uint8_t>& v) {
  size_t z = 0;
  for (auto x : v) z += x == 0;
  return z;
}

TEST(LevelEncodingTest, AllValidIsOneRleRun) {
  std::vector<uint8_t> levels(1000, 1);
  // header = 1000 << 1 = 2000 = varint 0xD0 0x0F; value byte 1
  EXPECT_EQ(Encode(levels, 0), Bytes({0xD0, 0x0F, 0x01}));
  std::vector<uint8_t> nulls(5, 0);
  EXPECT_EQ(Encode(nulls, 5), Bytes({0x0A, 0x00}));
}

TEST(LevelEncodingTest, MixedShortRunsAreBitPacked) {
  // 1,0,1,1,0,0,0,1 then 1,0: one bit-packed run of two groups (the last padded with zeros),
  // header (2 << 1) | 1.
  std::vector<uint8_t> levels = {1, 0, 1, 1, 0, 0, 0, 1, 1, 0};
  EXPECT_EQ(Encode(levels, Zeros(levels)), Bytes({0x05, 0x8D, 0x01}));
  // A run reaching the end leaves bit-packing: one group, then an RLE run of two ones.
  levels = {1, 0, 1, 1, 0, 0, 0, 1, 1, 1};
  EXPECT_EQ(Encode(levels, Zeros(levels)), Bytes({0x03, 0x8D, 0x04, 0x01}));
}

TEST(LevelEncodingTest, LongRunAfterMixedStretchBecomesRle) {
  std::vector<uint8_t> levels = {0, 1, 0, 1, 0, 1, 0, 1};
  levels.insert(levels.end(), 100, 1);
  // bit-packed group 0xAA, then RLE run of 100 ones: header 200 = 0xC8 0x01
  EXPECT_EQ(Encode(levels, Zeros(levels)), Bytes({0x03, 0xAA, 0xC8, 0x01, 0x01}));
}

TEST(LevelEncodingTest, RandomPatternsRoundTrip) {
  std::mt19937 rng(42);
  for (int trial = 0; trial < 300; ++trial) {
    size_t n = 1 + rng() % 3000;
    int mode = trial % 3;
    std::vector<uint8_t> levels(n);
    uint8_t cur = 1;
    for (size_t i = 0; i < n; ++i) {
      if (mode == 0) {
        levels[i] = rng() % 2;
      } else if (mode == 1) {  // long runs
        if (rng() % 50 == 0) cur ^= 1;
        levels[i] = cur;
      } else {  // rare NULLs
        levels[i] = rng() % 100 == 0 ? 0 : 1;
      }
    }
    std::string enc = Encode(levels, Zeros(levels));
    EXPECT_EQ(testing::DecodeLevels(enc, n), levels) << "trial " << trial;
    // Never worse than plain bit-packing plus a few headers.
    EXPECT_LE(enc.size(), n / 8 + 16 + n / 64);
  }
}

TEST(DecimalBytesTest, MinimalTwosComplement) {
  EXPECT_EQ(MinimalBigEndian(0), Bytes({0x00}));
  EXPECT_EQ(MinimalBigEndian(1), Bytes({0x01}));
  EXPECT_EQ(MinimalBigEndian(-1), Bytes({0xFF}));
  EXPECT_EQ(MinimalBigEndian(127), Bytes({0x7F}));
  EXPECT_EQ(MinimalBigEndian(128), Bytes({0x00, 0x80}));
  EXPECT_EQ(MinimalBigEndian(-128), Bytes({0x80}));
  EXPECT_EQ(MinimalBigEndian(-129), Bytes({0xFF, 0x7F}));
  EXPECT_EQ(MinimalBigEndian(12345), Bytes({0x30, 0x39}));
  __int128 p38 = 1;
  for (int i = 0; i < 38; ++i) p38 *= 10;
  // 10^38 - 1 = 0x4B3B4CA85A86C47A098A223FFFFFFFFF
  EXPECT_EQ(MinimalBigEndian(p38 - 1), Bytes({0x4B, 0x3B, 0x4C, 0xA8, 0x5A, 0x86, 0xC4, 0x7A, 0x09,
                                              0x8A, 0x22, 0x3F, 0xFF, 0xFF, 0xFF, 0xFF}));
  EXPECT_EQ(MinimalBigEndian(-(p38 - 1)), Bytes({0xB4, 0xC4, 0xB3, 0x57, 0xA5, 0x79, 0x3B, 0x85,
                                                 0xF6, 0x75, 0xDD, 0xC0, 0x00, 0x00, 0x00, 0x01}));
}

TEST(DecimalBytesTest, FixedWidthAndPrecisionTable) {
  uint8_t b[5];
  BigEndianBytes(-2, 5, b);
  EXPECT_EQ(std::string(reinterpret_cast<char*>(b), 5), Bytes({0xFF, 0xFF, 0xFF, 0xFF, 0xFE}));
  // The table of parquet-format's LogicalTypes.md (max precision per byte count).
  const int expected[] = {0,  1,  1,  2,  2,  3,  3,  4,  4,  4,  5,  5,  6,
                          6,  6,  7,  7,  8,  8,  9,  9,  9,  10, 10, 11, 11,
                          11, 12, 12, 13, 13, 13, 14, 14, 15, 15, 16, 16, 16};
  for (int p = 1; p <= 38; ++p)
    EXPECT_EQ(DecimalBytesForPrecision(p), expected[p]) << "precision " << p;
}

TEST(TruncateTest, Utf8ShortValuesAreKeptWhole) {
  EXPECT_EQ(TruncateUtf8Lower("abc", 16), "abc");
  EXPECT_EQ(TruncateUtf8Upper("abc", 16), "abc");
  EXPECT_EQ(TruncateUtf8Upper("", 16), "");
  std::string sixteen = "0123456789abcdef";
  EXPECT_EQ(TruncateUtf8Upper(sixteen, 16), sixteen);
}

TEST(TruncateTest, Utf8CountsCodePointsNotBytes) {
  std::string e_acute = "\xC3\xA9";  // é, 2 bytes
  std::string v;
  for (int i = 0; i < 20; ++i) v += e_acute;
  std::string lower;
  for (int i = 0; i < 16; ++i) lower += e_acute;
  EXPECT_EQ(TruncateUtf8Lower(v, 16), lower);
  std::string upper;
  for (int i = 0; i < 15; ++i) upper += e_acute;
  upper += "\xC3\xAA";  // ê = é + 1
  EXPECT_EQ(TruncateUtf8Upper(v, 16), upper);
  // Mixed widths: 15 ASCII then a 4-byte emoji at the 16th place, more after it.
  std::string mixed = std::string(15, 'a') + "\xF0\x9F\x98\x80" + "zz";
  EXPECT_EQ(TruncateUtf8Lower(mixed, 16), std::string(15, 'a') + "\xF0\x9F\x98\x80");
  EXPECT_EQ(TruncateUtf8Upper(mixed, 16), std::string(15, 'a') + "\xF0\x9F\x98\x81");
}

TEST(TruncateTest, Utf8UpperCarriesPastMaxCodePointAndSkipsSurrogates) {
  std::string max_cp = "\xF4\x8F\xBF\xBF";  // U+10FFFF
  std::string v = std::string(15, 'a') + max_cp + "b";
  // The 16th code point cannot grow: drop it and increment the 15th.
  EXPECT_EQ(TruncateUtf8Upper(v, 16), std::string(14, 'a') + "b");
  std::string all_max;
  for (int i = 0; i < 17; ++i) all_max += max_cp;
  EXPECT_EQ(TruncateUtf8Upper(all_max, 16), std::nullopt);
  // U+D7FF + 1 would be a surrogate: the next valid code point is U+E000.
  std::string before_surrogates = std::string(15, 'a') + "\xED\x9F\xBF" + "x";
  EXPECT_EQ(TruncateUtf8Upper(before_surrogates, 16), std::string(15, 'a') + "\xEE\x80\x80");
  // U+007F + 1 = U+0080 changes the encoded width.
  EXPECT_EQ(TruncateUtf8Upper(std::string(15, 'a') + "\x7F" + "x", 16),
            std::string(15, 'a') + "\xC2\x80");
}

TEST(TruncateTest, BinaryUpperIncrementsLastByteBelowFF) {
  std::string v(20, '\x01');
  EXPECT_EQ(TruncateBinaryLower(v, 16), std::string(16, '\x01'));
  EXPECT_EQ(TruncateBinaryUpper(v, 16), std::string(15, '\x01') + "\x02");
  std::string ff = std::string(14, 'a') + "\xFF\xFF" + "tail";
  EXPECT_EQ(TruncateBinaryUpper(ff, 16), std::string(13, 'a') + "b");
  EXPECT_EQ(TruncateBinaryUpper(std::string(17, '\xFF'), 16), std::nullopt);
  EXPECT_EQ(TruncateBinaryUpper(std::string(16, '\xFF'), 16), std::string(16, '\xFF'));
}

TEST(ByteBufferTest, GrowsAndKeepsContents) {
  ByteBuffer b;
  for (int i = 0; i < 100000; ++i) b.PushBack(static_cast<uint8_t>(i));
  EXPECT_EQ(b.size(), 100000u);
  EXPECT_EQ(static_cast<uint8_t>(b.data()[99999]), static_cast<uint8_t>(99999));
  size_t cap = b.capacity();
  b.clear();
  b.Append("xyz");
  EXPECT_EQ(b.view(), "xyz");
  EXPECT_EQ(b.capacity(), cap);
  b.PutVarint(300);
  b.PutLE32(0x01020304);
  EXPECT_EQ(b.view(), std::string("xyz") + Bytes({0xAC, 0x02, 0x04, 0x03, 0x02, 0x01}));
}

}  // namespace
}  // namespace ferry::parquet::internal

namespace ferry::parquet::internal {
namespace {

TEST(ParquetColumnNameTest, MatchesJavaIcebergSanitizing) {
  EXPECT_EQ(ParquetColumnName("order_id"), "order_id");
  EXPECT_EQ(ParquetColumnName("Qty x"), "Qty_x20x");
  EXPECT_EQ(ParquetColumnName("1st"), "_1st");
  EXPECT_EQ(ParquetColumnName("a\"b"), "a_x22b");
  EXPECT_EQ(ParquetColumnName("名"), "_x540D");
  EXPECT_EQ(ParquetColumnName("é"), "_xE9");
  EXPECT_EQ(ParquetColumnName("x😀"), "x_xD83D_xDE00");  // UTF-16 surrogates, as Java sees them
}

// The RLE/bit-packed hybrid of dictionary indices decodes back (test decoder) for every bit
// width and for runs, literals, and mixes of both; runs of 8+ become RLE runs.
TEST(EncodingTest, RleHybridRoundTrips) {
  std::mt19937 rng(5);
  for (int width = 1; width <= 32; ++width) {
    const uint64_t mask = width == 32 ? 0xFFFFFFFFull : (1ull << width) - 1;
    for (size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{100}, size_t{1000}}) {
      std::vector<uint32_t> v(n);
      for (size_t i = 0; i < n; ++i) {
        // Stretches of runs and of random values.
        v[i] = (i / 37) % 2 == 0 ? static_cast<uint32_t>((i / 10) & mask)
                                 : static_cast<uint32_t>(rng() & mask);
      }
      ByteBuffer b;
      EncodeRleHybrid(v.data(), n, width, &b);
      EXPECT_EQ(testing::DecodeHybrid(b.view(), n, width), v) << "width " << width << " n " << n;
    }
  }
  // One long run: a single RLE run, value in ceil(width / 8) bytes.
  std::vector<uint32_t> run(1000, 5);
  ByteBuffer b;
  EncodeRleHybrid(run.data(), run.size(), 3, &b);
  EXPECT_EQ(std::string(b.view()), Bytes({0xD0, 0x0F, 0x05}));
  // 8 distinct values at width 3: one bit-packed group of 3 bytes.
  std::vector<uint32_t> lit = {0, 1, 2, 3, 4, 5, 6, 7};
  b.clear();
  EncodeRleHybrid(lit.data(), lit.size(), 3, &b);
  EXPECT_EQ(std::string(b.view()), Bytes({0x03, 0x88, 0xC6, 0xFA}));
  EXPECT_EQ(DictionaryBitWidth(0), 1);
  EXPECT_EQ(DictionaryBitWidth(1), 1);
  EXPECT_EQ(DictionaryBitWidth(2), 1);
  EXPECT_EQ(DictionaryBitWidth(3), 2);
  EXPECT_EQ(DictionaryBitWidth(256), 8);
  EXPECT_EQ(DictionaryBitWidth(257), 9);
}

}  // namespace
}  // namespace ferry::parquet::internal
