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
  kList,  // Iceberg list: an element type (primitive), its field id and whether it is required
};

struct ListElement;

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
  // list<element>: `element` must be a primitive type (lists of lists are not supported).
  // element_id is the element's Iceberg field id (0 until ids are assigned).
  static DataType List(const DataType& element, bool element_required, int32_t element_id = 0);

  TypeKind kind() const { return kind_; }
  int precision() const { return precision_; }
  int scale() const { return scale_; }
  bool is_list() const { return kind_ == TypeKind::kList; }
  // The element of a list type; is_list() must hold.
  const ListElement& list() const;
  // The same list type with another element field id.
  DataType WithElementId(int32_t element_id) const;

  // Bytes each value takes in a column's fixed-width buffer; 0 for variable-width types and lists.
  int FixedWidth() const;
  bool IsVariableWidth() const { return FixedWidth() == 0; }

  // The Iceberg spelling of a primitive type: "long", "decimal(12,2)", "timestamptz", ...; for a
  // list "list<long>" (for messages: in metadata JSON a list is an object, see lake/metadata.h).
  std::string ToIceberg() const;
  static Result<DataType> FromIceberg(const std::string& text);

  // Equal kinds and parameters; for lists also equal element types, ids and requiredness.
  bool operator==(const DataType& o) const;
  // As ==, but element field ids are not compared.
  bool SameShape(const DataType& o) const;

 private:
  explicit DataType(TypeKind k) : kind_(k) {}
  TypeKind kind_ = TypeKind::kInt64;
  int precision_ = 0;
  int scale_ = 0;
  std::shared_ptr<const ListElement> element_;  // kList only
};

struct ListElement {
  int32_t id = 0;
  bool required = false;
  DataType type;
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
