// Internal building blocks of the Parquet writer: a growable byte buffer without zero-fill,
// the RLE/bit-packed hybrid level encoder, and Iceberg bound serialization helpers.
// Internal to ferry_parquet; exposed in a header so that the unit tests can reach them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace ferry::parquet::internal {

// A byte buffer that grows geometrically and never zero-fills (std::string::resize does).
// Keeps its capacity across clear(), so page and chunk buffers are reused.
class ByteBuffer {
 public:
  ByteBuffer() = default;
  ByteBuffer(const ByteBuffer&) = delete;
  ByteBuffer& operator=(const ByteBuffer&) = delete;

  const char* data() const { return data_.get(); }
  char* data() { return data_.get(); }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }
  bool empty() const { return size_ == 0; }
  std::string_view view() const { return std::string_view(data_.get(), size_); }

  void clear() { size_ = 0; }
  // Drops the storage too (after an unusually large row group, say).
  void Release() {
    data_.reset();
    size_ = capacity_ = 0;
  }
  void Reserve(size_t n) {
    if (n <= capacity_) return;
    size_t cap = capacity_ < 4096 ? 4096 : capacity_;
    while (cap < n) cap += cap / 2;
    std::unique_ptr<char[]> p(new char[cap]);
    if (size_ > 0) std::memcpy(p.get(), data_.get(), size_);
    data_ = std::move(p);
    capacity_ = cap;
  }
  // Grows by n uninitialized bytes and returns a pointer to them.
  char* AppendUninit(size_t n) {
    if (size_ + n > capacity_) Reserve(size_ + n);
    char* p = data_.get() + size_;
    size_ += n;
    return p;
  }
  void Append(const void* p, size_t n) {
    if (n == 0) return;
    std::memcpy(AppendUninit(n), p, n);
  }
  void Append(std::string_view s) { Append(s.data(), s.size()); }
  void PushBack(uint8_t b) { *AppendUninit(1) = static_cast<char>(b); }
  void Truncate(size_t n) { size_ = n; }
  void PutVarint(uint64_t v) {
    while (v >= 0x80) {
      PushBack(static_cast<uint8_t>((v & 0x7F) | 0x80));
      v >>= 7;
    }
    PushBack(static_cast<uint8_t>(v));
  }
  void PutLE32(uint32_t v) {
    uint8_t b[4] = {static_cast<uint8_t>(v), static_cast<uint8_t>(v >> 8),
                    static_cast<uint8_t>(v >> 16), static_cast<uint8_t>(v >> 24)};
    Append(b, 4);
  }

 private:
  std::unique_ptr<char[]> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

// Appends the RLE/bit-packed hybrid encoding, bit width 1, of levels[0, n) (each 0 or 1) to out.
// Long runs become RLE runs; mixed stretches become bit-packed groups of 8. No length prefix.
// `zeros` is the number of 0 levels when known (0 lets an all-ones page take the fast path).
void EncodeLevelsBitWidth1(const uint8_t* levels, size_t n, size_t zeros, ByteBuffer* out);

// Appends the RLE/bit-packed hybrid encoding of values[0, n), each below 2^bit_width (1..32), to
// out: runs of 8 or more equal values become RLE runs (value in ceil(bit_width / 8) little-endian
// bytes), other stretches bit-packed groups of 8, LSB first. No length prefix, no bit-width byte.
// This is how RLE_DICTIONARY data pages carry their dictionary indices.
void EncodeRleHybrid(const uint32_t* values, size_t n, int bit_width, ByteBuffer* out);

// Bits needed for dictionary indices 0..entries-1: at least 1 (as Arrow writes), 0 entries -> 1.
inline int DictionaryBitWidth(size_t entries) {
  int w = 1;
  while (w < 32 && (static_cast<uint64_t>(1) << w) < entries) ++w;
  return w;
}

// Two's-complement big-endian bytes of v using the fewest bytes (at least one), as Java's
// BigInteger.toByteArray: Iceberg's decimal single-value serialization.
std::string MinimalBigEndian(__int128 v);

// The Parquet column name for an Iceberg field name, made the way Java Iceberg makes it (Avro's
// compatible-name rule): letters, digits and '_' stay; a leading digit gets a '_' before it; any
// other UTF-16 code unit becomes "_x" + its upper-case hex. Readers resolve columns by field id,
// but some (icebird) look columns up by this name.
std::string ParquetColumnName(std::string_view iceberg_name);
// Two's-complement big-endian bytes of v in exactly `width` bytes (1..16): Parquet FLBA decimals.
void BigEndianBytes(__int128 v, int width, uint8_t* out);
// Bytes needed to hold any unscaled value of a decimal with `precision` digits (1..38).
int DecimalBytesForPrecision(int precision);

// Iceberg truncate(16) bounds for UTF-8 strings: the lower bound is the prefix of the first
// `code_points` code points; the upper bound is that prefix with its last code point incremented
// (surrogates skipped, U+10FFFF dropped and the previous one tried), nullopt if impossible.
// Values no longer than the limit are returned whole.
std::string TruncateUtf8Lower(std::string_view v, size_t code_points);
std::optional<std::string> TruncateUtf8Upper(std::string_view v, size_t code_points);
// Same for binary, counted in bytes; the upper bound increments the last byte below 0xFF.
std::string TruncateBinaryLower(std::string_view v, size_t n);
std::optional<std::string> TruncateBinaryUpper(std::string_view v, size_t n);

}  // namespace ferry::parquet::internal
