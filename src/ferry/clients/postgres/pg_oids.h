// PostgreSQL's built-in type OIDs (src/include/catalog/pg_type.dat), fixed across versions: the
// decoder's type mapping and the destination's COPY encoder name types by them.
#pragma once

#include <cstdint>

namespace ferry {

enum PgOid : uint32_t {
  kBoolOid = 16,
  kByteaOid = 17,
  kNameOid = 19,
  kInt8Oid = 20,
  kInt2Oid = 21,
  kInt4Oid = 23,
  kTextOid = 25,
  kOidOid = 26,
  kJsonOid = 114,
  kFloat4Oid = 700,
  kFloat8Oid = 701,
  kBoolArrayOid = 1000,
  kByteaArrayOid = 1001,
  kInt4ArrayOid = 1007,
  kTextArrayOid = 1009,
  kInt8ArrayOid = 1016,
  kFloat4ArrayOid = 1021,
  kFloat8ArrayOid = 1022,
  kBpcharOid = 1042,
  kVarcharOid = 1043,
  kDateOid = 1082,
  kTimeOid = 1083,
  kTimestampOid = 1114,
  kTimestampArrayOid = 1115,
  kDateArrayOid = 1182,
  kTimeArrayOid = 1183,
  kTimestampTzOid = 1184,
  kTimestampTzArrayOid = 1185,
  kIntervalOid = 1186,
  kNumericArrayOid = 1231,
  kTimeTzOid = 1266,
  kNumericOid = 1700,
  kUuidOid = 2950,
  kUuidArrayOid = 2951,
  kJsonbOid = 3802,
};

}  // namespace ferry
