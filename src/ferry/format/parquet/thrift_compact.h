// Thrift compact protocol encoder and decoder, just enough for Parquet's footer and page headers.
//
// Internal to ferry_parquet. Writes straight into a caller-owned std::string, no allocation other
// than the string's growth. Structs nest up to kMaxDepth levels; the caller pairs every
// BeginStruct/StructField with EndStruct (which writes the stop byte).
//
// Encoding (thrift compact protocol spec):
//   field header  = (delta << 4) | type   when 0 < delta = id - last_id <= 15
//                 = type, zigzag-varint(id) otherwise
//   i16/i32/i64   = zigzag varint; binary = varint length + bytes
//   bool field    = type nibble 1 (true) / 2 (false), no payload
//   list header   = (size << 4) | elem_type when size < 15, else 0xF0 | elem_type, varint size
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ferry/base/assert.h"

namespace ferry::parquet::thrift {

enum CType : uint8_t {
  kStop = 0,
  kBoolTrue = 1,
  kBoolFalse = 2,
  kByte = 3,
  kI16 = 4,
  kI32 = 5,
  kI64 = 6,
  kDouble = 7,
  kBinary = 8,
  kList = 9,
  kSet = 10,
  kMap = 11,
  kStruct = 12,
};

class CompactWriter {
 public:
  static constexpr int kMaxDepth = 16;

  explicit CompactWriter(std::string* out) : out_(out) {}

  // Top-level struct (or a struct that is a list element).
  void BeginStruct() { Push(); }
  // A struct-typed field of the current struct.
  void StructField(int16_t id) {
    FieldHeader(id, kStruct);
    Push();
  }
  void EndStruct() {
    out_->push_back(static_cast<char>(kStop));
    --depth_;
  }

  void I32Field(int16_t id, int32_t v) {
    FieldHeader(id, kI32);
    I32(v);
  }
  void I16Field(int16_t id, int16_t v) {
    FieldHeader(id, kI16);
    I32(v);
  }
  void I64Field(int16_t id, int64_t v) {
    FieldHeader(id, kI64);
    I64(v);
  }
  void BoolField(int16_t id, bool v) { FieldHeader(id, v ? kBoolTrue : kBoolFalse); }
  void BinaryField(int16_t id, std::string_view v) {
    FieldHeader(id, kBinary);
    Binary(v);
  }
  // A list-typed field; follow with `size` elements written by I32()/Binary()/BeginStruct().
  void ListField(int16_t id, CType elem_type, uint32_t size) {
    FieldHeader(id, kList);
    ListHeader(elem_type, size);
  }

  // Bare values (list elements).
  void I32(int32_t v) { Varint(ZigZag32(v)); }
  void I64(int64_t v) { Varint(ZigZag64(v)); }
  void Binary(std::string_view v) {
    Varint(v.size());
    out_->append(v.data(), v.size());
  }
  void ListHeader(CType elem_type, uint32_t size) {
    if (size < 15) {
      out_->push_back(static_cast<char>((size << 4) | elem_type));
    } else {
      out_->push_back(static_cast<char>(0xF0 | elem_type));
      Varint(size);
    }
  }

  void Varint(uint64_t v) {
    char buf[10];
    int n = 0;
    while (v >= 0x80) {
      buf[n++] = static_cast<char>((v & 0x7F) | 0x80);
      v >>= 7;
    }
    buf[n++] = static_cast<char>(v);
    out_->append(buf, static_cast<size_t>(n));
  }

  static uint32_t ZigZag32(int32_t v) {
    return (static_cast<uint32_t>(v) << 1) ^ static_cast<uint32_t>(v >> 31);
  }
  static uint64_t ZigZag64(int64_t v) {
    return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
  }

  int depth() const { return depth_; }

 private:
  void Push() {
    FERRY_CHECK(depth_ < kMaxDepth);
    last_id_[depth_++] = 0;
  }
  void FieldHeader(int16_t id, CType type) {
    FERRY_CHECK(depth_ > 0);
    int16_t& last = last_id_[depth_ - 1];
    int delta = id - last;
    if (delta > 0 && delta <= 15) {
      out_->push_back(static_cast<char>((delta << 4) | type));
    } else {
      out_->push_back(static_cast<char>(type));
      Varint(ZigZag32(id));
    }
    last = id;
  }

  std::string* out_;
  int16_t last_id_[kMaxDepth] = {};
  int depth_ = 0;
};

// Decoder over bytes that may be truncated or corrupted (a footer read from disk): every read is
// bounds-checked and the first error sticks — ok() turns false, error() says what was wrong, and
// every later read returns zero/empty — so a caller may check once after a struct. Nesting (structs
// and skipped values) is limited to kMaxDepth; a list never claims more elements than there are
// bytes left, so a corrupted size cannot make the caller allocate without bound.
//
// Use: BeginStruct(), then `while (NextField(&id, &type))` read the field's value with
// I32/I64/Binary/BoolField/ListHeader/BeginStruct, or Skip(type) for fields not wanted.
// NextField returns false at the struct's stop byte (and leaves the struct) or on error.
class CompactReader {
 public:
  static constexpr int kMaxDepth = 16;

  explicit CompactReader(std::string_view in) : p_(in.data()), n_(in.size()) {}

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  size_t pos() const { return pos_; }
  size_t remaining() const { return n_ - pos_; }

  void Fail(std::string message) {
    if (error_.empty()) error_ = std::move(message) + " at byte " + std::to_string(pos_);
    pos_ = n_;
  }

  void BeginStruct() {
    if (depth_ >= kMaxDepth) return Fail("thrift: structs nested too deeply");
    last_id_[depth_++] = 0;
  }

  bool NextField(int16_t* id, CType* type) {
    if (!ok() || depth_ == 0) return false;
    const uint8_t h = Byte();
    if (!ok()) return false;
    if (h == kStop) {
      --depth_;
      return false;
    }
    *type = static_cast<CType>(h & 0x0F);
    const int delta = h >> 4;
    int16_t& last = last_id_[depth_ - 1];
    if (delta != 0) {
      *id = static_cast<int16_t>(last + delta);
    } else {
      const int64_t v = ZigZagDecode(Varint());
      if (v < INT16_MIN || v > INT16_MAX) {
        Fail("thrift: field id out of range");
        return false;
      }
      *id = static_cast<int16_t>(v);
    }
    if (*type > kStruct || *type == kStop) {
      Fail("thrift: unknown field type " + std::to_string(static_cast<int>(*type)));
      return false;
    }
    last = *id;
    return ok();
  }

  int32_t I32() {
    const int64_t v = ZigZagDecode(Varint());
    if (v < INT32_MIN || v > INT32_MAX) {
      Fail("thrift: i32 out of range");
      return 0;
    }
    return static_cast<int32_t>(v);
  }
  int64_t I64() { return ZigZagDecode(Varint()); }
  // A bool field's value is in its header's type nibble.
  static bool BoolField(CType type) { return type == kBoolTrue; }
  std::string_view Binary() {
    const uint64_t len = Varint();
    if (!ok()) return {};
    if (len > remaining()) {
      Fail("thrift: binary of " + std::to_string(len) + " bytes runs past the end");
      return {};
    }
    std::string_view v(p_ + pos_, static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return v;
  }
  // A list (or set) header. Fails when the size exceeds the bytes left (every element takes at
  // least one byte).
  bool ListHeader(CType* elem_type, uint32_t* size) {
    const uint8_t h = Byte();
    uint64_t n = h >> 4;
    *elem_type = static_cast<CType>(h & 0x0F);
    if (n == 15) n = Varint();
    if (!ok()) return false;
    if (n > remaining()) {
      Fail("thrift: list of " + std::to_string(n) + " elements runs past the end");
      return false;
    }
    *size = static_cast<uint32_t>(n);
    return true;
  }

  // Skips one value of `type` (a field's, or a list element's).
  void Skip(CType type) { SkipValue(type, 0, false); }

  static int64_t ZigZagDecode(uint64_t v) {
    return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
  }

 private:
  uint8_t Byte() {
    if (pos_ >= n_) {
      Fail("thrift: unexpected end of data");
      return 0;
    }
    return static_cast<uint8_t>(p_[pos_++]);
  }
  uint64_t Varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const uint8_t b = Byte();
      if (!ok()) return 0;
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return v;
    }
    Fail("thrift: varint longer than 10 bytes");
    return 0;
  }
  void SkipValue(CType type, int depth, bool in_list) {
    if (!ok()) return;
    if (depth > kMaxDepth) return Fail("thrift: values nested too deeply");
    switch (type) {
      case kBoolTrue:
      case kBoolFalse:
        if (in_list) Byte();  // a list element takes a byte; a field's value is in its header
        return;
      case kByte:
        Byte();
        return;
      case kI16:
      case kI32:
      case kI64:
        Varint();
        return;
      case kDouble:
        if (remaining() < 8) return Fail("thrift: unexpected end of data");
        pos_ += 8;
        return;
      case kBinary:
        Binary();
        return;
      case kList:
      case kSet: {
        CType et;
        uint32_t size;
        if (!ListHeader(&et, &size)) return;
        for (uint32_t i = 0; i < size && ok(); ++i) SkipValue(et, depth + 1, true);
        return;
      }
      case kMap: {
        const uint64_t size = Varint();
        if (!ok() || size == 0) return;
        if (size > remaining()) return Fail("thrift: map runs past the end");
        const uint8_t kv = Byte();
        for (uint64_t i = 0; i < size && ok(); ++i) {
          SkipValue(static_cast<CType>(kv >> 4), depth + 1, true);
          SkipValue(static_cast<CType>(kv & 0x0F), depth + 1, true);
        }
        return;
      }
      case kStruct: {
        for (;;) {
          const uint8_t h = Byte();
          if (!ok() || h == kStop) return;
          if ((h >> 4) == 0) Varint();  // a long-form field id
          SkipValue(static_cast<CType>(h & 0x0F), depth + 1, false);
          if (!ok()) return;
        }
      }
      case kStop:
        break;
    }
    Fail("thrift: unknown value type " + std::to_string(static_cast<int>(type)));
  }

  const char* p_;
  size_t n_;
  size_t pos_ = 0;
  int16_t last_id_[kMaxDepth] = {};
  int depth_ = 0;
  std::string error_;
};

}  // namespace ferry::parquet::thrift
