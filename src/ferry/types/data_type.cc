#include "ferry/types/data_type.h"

#include <algorithm>
#include <cstdio>

#include "ferry/base/assert.h"

namespace ferry {

int DataType::FixedWidth() const {
  switch (kind_) {
    case TypeKind::kBoolean:
      return 1;
    case TypeKind::kInt32:
    case TypeKind::kFloat32:
    case TypeKind::kDate:
      return 4;
    case TypeKind::kInt64:
    case TypeKind::kFloat64:
    case TypeKind::kTime:
    case TypeKind::kTimestamp:
    case TypeKind::kTimestampTz:
      return 8;
    case TypeKind::kDecimal:
    case TypeKind::kUuid:
      return 16;
    case TypeKind::kString:
    case TypeKind::kBinary:
    case TypeKind::kList:
      return 0;
  }
  return 0;
}

DataType DataType::List(const DataType& element, bool element_required, int32_t element_id) {
  DataType t(TypeKind::kList);
  auto e = std::make_shared<ListElement>();
  e->id = element_id;
  e->required = element_required;
  e->type = element;
  t.element_ = std::move(e);
  return t;
}

const ListElement& DataType::list() const {
  FERRY_CHECK(kind_ == TypeKind::kList && element_ != nullptr);
  return *element_;
}

DataType DataType::WithElementId(int32_t element_id) const {
  const ListElement& e = list();
  return List(e.type, e.required, element_id);
}

bool DataType::SameShape(const DataType& o) const {
  if (kind_ != o.kind_ || precision_ != o.precision_ || scale_ != o.scale_) return false;
  if (kind_ != TypeKind::kList) return true;
  return element_->required == o.element_->required && element_->type.SameShape(o.element_->type);
}

bool DataType::operator==(const DataType& o) const {
  if (!SameShape(o)) return false;
  return kind_ != TypeKind::kList || element_->id == o.element_->id;
}

std::string DataType::ToIceberg() const {
  switch (kind_) {
    case TypeKind::kBoolean:
      return "boolean";
    case TypeKind::kInt32:
      return "int";
    case TypeKind::kInt64:
      return "long";
    case TypeKind::kFloat32:
      return "float";
    case TypeKind::kFloat64:
      return "double";
    case TypeKind::kDecimal:
      return "decimal(" + std::to_string(precision_) + "," + std::to_string(scale_) + ")";
    case TypeKind::kDate:
      return "date";
    case TypeKind::kTime:
      return "time";
    case TypeKind::kTimestamp:
      return "timestamp";
    case TypeKind::kTimestampTz:
      return "timestamptz";
    case TypeKind::kString:
      return "string";
    case TypeKind::kBinary:
      return "binary";
    case TypeKind::kUuid:
      return "uuid";
    case TypeKind::kList:
      return "list<" + element_->type.ToIceberg() + ">";
  }
  return "?";
}

Result<DataType> DataType::FromIceberg(const std::string& text) {
  static const std::pair<const char*, TypeKind> kSimple[] = {
      {"boolean", TypeKind::kBoolean},
      {"int", TypeKind::kInt32},
      {"long", TypeKind::kInt64},
      {"float", TypeKind::kFloat32},
      {"double", TypeKind::kFloat64},
      {"date", TypeKind::kDate},
      {"time", TypeKind::kTime},
      {"timestamp", TypeKind::kTimestamp},
      {"timestamptz", TypeKind::kTimestampTz},
      {"string", TypeKind::kString},
      {"binary", TypeKind::kBinary},
      {"uuid", TypeKind::kUuid},
  };
  for (const auto& [name, kind] : kSimple) {
    if (text == name) return DataType(kind);
  }
  int p = 0, s = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "decimal(%d,%d%c", &p, &s, &tail) == 3 && tail == ')' && p >= 1 &&
      p <= 38 && s >= 0 && s <= p) {
    return Decimal(p, s);
  }
  return Status::NotSupported("Iceberg type '" + text + "' is not supported by ferry");
}

const Field* Schema::FindByName(const std::string& name) const {
  for (const auto& f : fields)
    if (f.name == name) return &f;
  return nullptr;
}

const Field* Schema::FindById(int32_t id) const {
  for (const auto& f : fields)
    if (f.id == id) return &f;
  return nullptr;
}

int32_t Schema::HighestFieldId() const {
  int32_t m = 0;
  for (const auto& f : fields) {
    m = std::max(m, f.id);
    if (f.type.is_list()) m = std::max(m, f.type.list().id);
  }
  return m;
}

bool Schema::SameStructure(const Schema& o) const {
  if (fields.size() != o.fields.size() || identifier_field_ids != o.identifier_field_ids)
    return false;
  for (size_t i = 0; i < fields.size(); ++i) {
    const Field& a = fields[i];
    const Field& b = o.fields[i];
    if (a.id != b.id || a.name != b.name || !(a.type == b.type) || a.required != b.required)
      return false;
  }
  return true;
}

}  // namespace ferry
