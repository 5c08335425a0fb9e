// PostgreSQL column types -> Iceberg types and COPY wire forms (docs/type-mapping.md).
//
// The mapping works on the column's base type (domains resolved by the caller) identified by its
// OID (built-in type OIDs are fixed across PostgreSQL versions), its typtype/typcategory (enums,
// arrays) and its type modifier (numeric precision and scale). An array of a mappable type maps to
// an Iceberg list of the element's type with optional elements (PostgreSQL arrays may hold NULLs).
// A type ferry cannot map gives an error naming the column, the type and the fix; the table is
// still listed by discovery.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ferry/clients/postgres/copy_binary.h"
#include "ferry/types/data_type.h"

namespace ferry::pg {

struct PgBaseType {
  uint32_t oid = 0;
  char typtype = 'b';  // b base, e enum, d domain (resolved before mapping), r range, c composite
  char typcategory = 'U';  // A = array
  int32_t typmod = -1;     // the column's (or domain's) type modifier
  std::string display;     // format_type(...) of the column, for messages
  // Arrays (typcategory 'A'): the element's base type (domains resolved; the column's modifier
  // applies to it), filled by discovery.
  std::shared_ptr<const PgBaseType> element;
};

struct PgMapping {
  PgWire wire = PgWire::kText;
  DataType type = DataType::String();
  std::string error;  // non-empty: the column cannot be synced, and why
};

PgMapping MapPgType(const PgBaseType& t, const std::string& column);

// Whether a column can be an incremental cursor, and how its values travel. A cursor needs a total
// order that PostgreSQL's `>`/`<=` and ORDER BY agree on, and a JSON form that round-trips exactly
// into a literal: integers (int2, int4, int8, oid) as JSON integers; numeric, float4/float8, date,
// time, timestamp, timestamptz, text, varchar, char, name and uuid as their exact text (the session
// pins TimeZone UTC, DateStyle ISO and extra_float_digits 3, so the text is unambiguous).
// Refused: json (no order), jsonb, bytea, bool, money, interval, timetz, enums, arrays, ranges and
// anything unmapped: an order that is useless or surprising, or text that depends on settings.
struct CursorSupport {
  enum class Kind : uint8_t { kInteger, kText, kRefused };
  Kind kind = Kind::kRefused;
  std::string cast;           // the literal's type, schema-qualified ("pg_catalog.timestamptz")
  bool nan_possible = false;  // numeric and floats: NaN and ±Infinity are refused as maxima
  std::string why;            // kRefused: why, for messages ("json has no ordering")
  // A natural cursor (integers, numeric, date, timestamps): listed as a discovery candidate.
  bool candidate = false;
};
CursorSupport ClassifyCursor(const PgBaseType& t);

// numeric's type modifier -> precision and scale; false when unconstrained (typmod -1).
bool NumericTypmod(int32_t typmod, int* precision, int* scale);

}  // namespace ferry::pg
