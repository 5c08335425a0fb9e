// Logical types, fields and schemas: what a column means, independent of how a source spells it
// or how a file format stores it. Iceberg's type system is the model (field ids, required/optional,
// identifier fields = the primary key).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ferry/base/status.h"

namespace ferry {

enum class TypeKind : uint8_t {
  kBoolean,
  kInt32,
  kInt64,
  kFloat32,
  kFloat64,
  kDecimal,      // precision 1..38, scale 0..precision; stored as a 128-bit unscaled integer
  kDate,         // days since 1970-01-01, int32
  kTime,         // microseconds since midnight, int64
  kTimestamp,    // microseconds since 1970-01-01 00:00, no zone, int64
  kTimestampTz,  // microseconds since 1970-01-01 00:00 UTC, int64
  kString,       // UTF-8
  kBinary,
  kUuid,  // 16 bytes, big-endian as written in text form
};

class DataType {
 public:
  DataType() = default;
  static DataType Boolean() { return DataType(TypeKind::kBoolean); }
  static DataType Int32() { return DataType(TypeKind::kInt32); }
  static DataType Int64() { return DataType(TypeKind::kInt64); }
  static DataType Float32() { return DataType(TypeKind::kFloat32); }
  static DataType Float64() { return DataType(TypeKind::kFloat64); }
  static DataType Decimal(int precision, int scale) {
    DataType t(TypeKind::kDecimal);
    t.precision_ = precision;
    t.scale_ = scale;
    return t;
  }
  static DataType Date() { return DataType(TypeKind::kDate); }
  static DataType Time() { return DataType(TypeKind::kTime); }
  static DataType Timestamp() { return DataType(TypeKind::kTimestamp); }
  static DataType TimestampTz() { return DataType(TypeKind::kTimestampTz); }
  static DataType String() { return DataType(TypeKind::kString); }
  static DataType Binary() { return DataType(TypeKind::kBinary); }
  static DataType Uuid() { return DataType(TypeKind::kUuid); }

  TypeKind kind() const { return kind_; }
  int precision() const { return precision_; }
  int scale() const { return scale_; }

  // Bytes each value takes in a column's fixed-width buffer; 0 for variable-width types.
  int FixedWidth() const;
  bool IsVariableWidth() const { return FixedWidth() == 0; }

  // The Iceberg spelling: "long", "decimal(12,2)", "timestamptz", ...
  std::string ToIceberg() const;
  static Result<DataType> FromIceberg(const std::string& text);

  bool operator==(const DataType& o) const {
    return kind_ == o.kind_ && precision_ == o.precision_ && scale_ == o.scale_;
  }

 private:
  explicit DataType(TypeKind k) : kind_(k) {}
  TypeKind kind_ = TypeKind::kInt64;
  int precision_ = 0;
  int scale_ = 0;
};

struct Field {
  int32_t id = 0;
  std::string name;
  DataType type;
  bool required = false;
  std::string doc;
};

struct Schema {
  int32_t schema_id = 0;
  std::vector<Field> fields;
  std::vector<int32_t> identifier_field_ids;  // the primary key, by field id

  const Field* FindByName(const std::string& name) const;
  const Field* FindById(int32_t id) const;
  int32_t HighestFieldId() const;
  // Same columns (names, ids, types, nullability) and keys; schema_id is not compared.
  bool SameStructure(const Schema& o) const;
};

}  // namespace ferry
