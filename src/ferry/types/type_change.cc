#include "ferry/types/type_change.h"

namespace ferry {
namespace {

bool SamePrimitive(const DataType& a, const DataType& b) {
  return a.kind() == b.kind() && a.precision() == b.precision() && a.scale() == b.scale();
}

TypeChange ComparePrimitive(const DataType& table, const DataType& source) {
  if (SamePrimitive(table, source)) return TypeChange::kSame;
  return IsWidening(table, source) ? TypeChange::kWiden : TypeChange::kRefused;
}

}  // namespace

bool IsWidening(const DataType& from, const DataType& to) {
  if (from.kind() == TypeKind::kInt32 && to.kind() == TypeKind::kInt64) return true;
  if (from.kind() == TypeKind::kFloat32 && to.kind() == TypeKind::kFloat64) return true;
  return from.kind() == TypeKind::kDecimal && to.kind() == TypeKind::kDecimal &&
         from.scale() == to.scale() && to.precision() > from.precision();
}

TypeChange CompareTypes(const DataType& table, const DataType& source) {
  if (table.is_list() != source.is_list()) return TypeChange::kRefused;
  if (!table.is_list()) return ComparePrimitive(table, source);
  return ComparePrimitive(table.list().type, source.list().type);
}

std::optional<DataType> EvolvedType(const DataType& table, const DataType& source) {
  if (CompareTypes(table, source) == TypeChange::kRefused) return std::nullopt;
  if (!source.is_list()) return source;
  return DataType::List(source.list().type, table.list().required && source.list().required);
}

}  // namespace ferry
