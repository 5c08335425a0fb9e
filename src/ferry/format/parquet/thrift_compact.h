// Thrift compact protocol encoder, just enough for Parquet's footer and page headers.
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

}  // namespace ferry::parquet::thrift
