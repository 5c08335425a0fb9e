#include "ferry/sink/postgres/pg_evolve.h"

#include <cstdio>

#include "ferry/sink/postgres/copy_encoder.h"

namespace ferry::sink::pg {
namespace {

std::optional<DataType> PrimitiveOfPgName(const std::string& t) {
  int p = 0, s = 0;
  char end = 0;
  if (std::sscanf(t.c_str(), "numeric(%d,%d%c", &p, &s, &end) == 3 && end == ')' &&
      PgTypeName(DataType::Decimal(p, s)) == t) {
    return DataType::Decimal(p, s);
  }
  for (const DataType& d :
       {DataType::Boolean(), DataType::Int32(), DataType::Int64(), DataType::Float32(),
        DataType::Float64(), DataType::Date(), DataType::Time(), DataType::Timestamp(),
        DataType::TimestampTz(), DataType::String(), DataType::Binary(), DataType::Uuid()}) {
    if (PgTypeName(d) == t) return d;
  }
  return std::nullopt;
}

bool IsInteger(const DataType& t) {
  return t.kind() == TypeKind::kInt32 || t.kind() == TypeKind::kInt64;
}

}  // namespace

std::optional<DataType> FerryTypeOfPgName(const std::string& pg_type) {
  if (pg_type.size() > 2 && pg_type.compare(pg_type.size() - 2, 2, "[]") == 0) {
    auto element = PrimitiveOfPgName(pg_type.substr(0, pg_type.size() - 2));
    if (!element) return std::nullopt;
    return DataType::List(*element, false);
  }
  return PrimitiveOfPgName(pg_type);
}

TypeChange CompareColumnType(const std::string& have, const DataType& want) {
  if (have == PgTypeName(want)) return TypeChange::kSame;
  if (auto t = FerryTypeOfPgName(have)) return CompareTypes(*t, want);
  if (have == "smallint" && IsInteger(want)) return TypeChange::kWiden;
  if (have == "numeric" && want.kind() == TypeKind::kDecimal) return TypeChange::kSame;
  if (have == "character varying" && want.kind() == TypeKind::kString) return TypeChange::kSame;
  return TypeChange::kRefused;
}

}  // namespace ferry::sink::pg
