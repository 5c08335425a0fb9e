#include "ferry/clients/postgres/pg_types.h"

#include "ferry/clients/postgres/pg_oids.h"

namespace ferry::pg {
namespace {

PgMapping Map(PgWire wire, DataType type) {
  PgMapping m;
  m.wire = wire;
  m.type = type;
  return m;
}

}  // namespace

bool NumericTypmod(int32_t typmod, int* precision, int* scale) {
  if (typmod < 4) return false;  // VARHDRSZ: -1 means no modifier
  int32_t t = typmod - 4;
  *precision = (t >> 16) & 0xFFFF;
  *scale = (((t & 0x7FF) ^ 1024) - 1024);  // 11-bit signed since PostgreSQL 15
  return true;
}

PgMapping MapPgType(const PgBaseType& t, const std::string& column) {
  if (t.typcategory == 'A') {
    PgMapping m;
    if (t.element == nullptr || t.element->typcategory == 'A') {
      m.error = "column " + column + " has array type " + t.display +
                " whose element type ferry cannot resolve; cast it to jsonb in a view "
                "(to_jsonb(col)) or exclude the table";
      return m;
    }
    PgMapping e = MapPgType(*t.element, column);
    if (!e.error.empty()) {
      m.error = "column " + column + " has array type " + t.display +
                " of an element type ferry cannot map; cast it in a view (e.g. col::text[] or "
                "to_jsonb(col)) or exclude the table";
      return m;
    }
    m.wire = PgArrayOf(e.wire);
    m.type = DataType::List(e.type, /*element_required=*/false);
    return m;
  }
  if (t.typtype == 'e') return Map(PgWire::kText, DataType::String());
  switch (t.oid) {
    case kBoolOid:
      return Map(PgWire::kBool, DataType::Boolean());
    case kInt2Oid:
      return Map(PgWire::kInt2, DataType::Int32());
    case kInt4Oid:
      return Map(PgWire::kInt4, DataType::Int32());
    case kInt8Oid:
      return Map(PgWire::kInt8, DataType::Int64());
    case kOidOid:
      return Map(PgWire::kOid, DataType::Int64());
    case kFloat4Oid:
      return Map(PgWire::kFloat4, DataType::Float32());
    case kFloat8Oid:
      return Map(PgWire::kFloat8, DataType::Float64());
    case kNumericOid: {
      int p = 0, s = 0;
      if (!NumericTypmod(t.typmod, &p, &s)) return Map(PgWire::kNumericText, DataType::String());
      // PostgreSQL 15 allows a negative scale (numeric(5,-2): multiples of 100) and a scale above
      // the precision (numeric(2,5): below 0.001): both fit a decimal exactly.
      int ip = p, is = s;
      if (s < 0) {
        ip = p - s;
        is = 0;
      } else if (s > p) {
        ip = s;
      }
      if (ip < 1 || ip > 38) return Map(PgWire::kNumericText, DataType::String());
      return Map(PgWire::kNumericDecimal, DataType::Decimal(ip, is));
    }
    case kTextOid:
    case kVarcharOid:
    case kBpcharOid:
    case kNameOid:
    case kJsonOid:
      return Map(PgWire::kText, DataType::String());
    case kJsonbOid:
      return Map(PgWire::kJsonb, DataType::String());
    case kByteaOid:
      return Map(PgWire::kBytea, DataType::Binary());
    case kDateOid:
      return Map(PgWire::kDate, DataType::Date());
    case kTimeOid:
      return Map(PgWire::kTime, DataType::Time());
    case kTimeTzOid:
      return Map(PgWire::kTimeTz, DataType::String());
    case kTimestampOid:
      return Map(PgWire::kTimestamp, DataType::Timestamp());
    case kTimestampTzOid:
      return Map(PgWire::kTimestampTz, DataType::TimestampTz());
    case kIntervalOid:
      return Map(PgWire::kInterval, DataType::String());
    case kUuidOid:
      return Map(PgWire::kUuid, DataType::Uuid());
    default:
      break;
  }
  PgMapping m;
  m.error = "ferry cannot map type " + t.display + " of column " + column +
            "; cast it in a view (e.g. col::text) or exclude the table";
  return m;
}

CursorSupport ClassifyCursor(const PgBaseType& t) {
  CursorSupport s;
  auto ok = [&](CursorSupport::Kind kind, const char* type, bool candidate, bool nan = false) {
    s.kind = kind;
    s.cast = std::string("pg_catalog.") + type;
    s.candidate = candidate;
    s.nan_possible = nan;
    return s;
  };
  using K = CursorSupport::Kind;
  if (t.typcategory == 'A') {
    s.why = "arrays cannot be cursors";
    return s;
  }
  if (t.typtype == 'e') {
    s.why = "enum values order by declaration, not by when a row changed";
    return s;
  }
  if (t.typtype == 'r' || t.typtype == 'm') {
    s.why = "ranges cannot be cursors";
    return s;
  }
  switch (t.oid) {
    case kInt2Oid:
      return ok(K::kInteger, "int2", true);
    case kInt4Oid:
      return ok(K::kInteger, "int4", true);
    case kInt8Oid:
      return ok(K::kInteger, "int8", true);
    case kOidOid:
      return ok(K::kInteger, "oid", false);
    case kNumericOid:
      return ok(K::kText, "numeric", true, true);
    case kFloat4Oid:
      return ok(K::kText, "float4", false, true);
    case kFloat8Oid:
      return ok(K::kText, "float8", false, true);
    case kDateOid:
      return ok(K::kText, "date", true);
    case kTimeOid:
      return ok(K::kText, "time", false);
    case kTimestampOid:
      return ok(K::kText, "timestamp", true);
    case kTimestampTzOid:
      return ok(K::kText, "timestamptz", true);
    case kTextOid:
      return ok(K::kText, "text", false);
    case kVarcharOid:
      return ok(K::kText, "varchar", false);
    case kBpcharOid:
      return ok(K::kText, "bpchar", false);
    case kNameOid:
      return ok(K::kText, "name", false);
    case kUuidOid:
      return ok(K::kText, "uuid", false);
    case kJsonOid:
      s.why = "json has no ordering";
      return s;
    case kJsonbOid:
      s.why = "jsonb's ordering is not a change order";
      return s;
    case kByteaOid:
      s.why = "bytea is not supported as a cursor";
      return s;
    case kBoolOid:
      s.why = "a boolean has only two values";
      return s;
    case kIntervalOid:
      s.why = "interval values that compare equal print differently ('1 day', '24:00:00')";
      return s;
    case kTimeTzOid:
      s.why = "timetz compares by UTC time of day, not by when a row changed";
      return s;
    default:
      break;
  }
  s.why = "type " + t.display + " is not supported as a cursor";
  return s;
}

}  // namespace ferry::pg
