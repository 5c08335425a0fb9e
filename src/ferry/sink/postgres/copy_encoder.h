// Columnar batches -> PostgreSQL's COPY ... FROM STDIN (FORMAT binary) stream: the inverse of
// source/postgres/copy_binary.h, for loading a table ferry created (PgTypeName gives each column's
// type, so every value has exactly one binary form).
//
// The stream: the signature "PGCOPY\n\377\r\n\0", an Int32 flags word (0) and an Int32 header
// extension length (0); per tuple an Int16 field count and per field an Int32 length (-1 = NULL)
// followed by the value in its type's binary "send" format; finally an Int16 -1 trailer. Integers
// are big-endian.
//
// Values map as the decoder reads them: dates and timestamps move from ferry's 1970 epoch to
// PostgreSQL's 2000 epoch; a decimal becomes a base-10000 numeric with dscale = its scale; a list
// becomes a one-dimensional array with lower bound 1 (an empty list an array of zero dimensions).
// Infinite dates and timestamps never reach a batch (the decoder refuses them), so no ferry value
// is encoded as PostgreSQL's ±infinity.
//
// The encoder is on the hot path of bulk loads: it sizes the output once per call, branches on a
// column's type once per call and allocates nothing per value. Thread-compatible (no state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ferry/base/status.h"
#include "ferry/types/batch.h"
#include "ferry/types/data_type.h"

namespace ferry::sink::pg {

// The PostgreSQL type a column of `type` is created with in a target table: boolean, integer,
// bigint, real, double precision, numeric(p,s), date, time without time zone, timestamp without
// time zone, timestamp with time zone, text, bytea, uuid; for a list "<element type>[]" (e.g.
// "numeric(10,2)[]").
std::string PgTypeName(const DataType& type);
// The OID of PgTypeName(type): for a list the array type's OID (_int4 = 1007, ...); the element OID
// that an array value's header carries is PgTypeOid(type.list().type). 0 for a list of lists.
uint32_t PgTypeOid(const DataType& type);

// The 19-byte stream header (no OIDs, no extension) and the 2-byte trailer.
void AppendCopyHeader(std::string* out);
void AppendCopyTrailer(std::string* out);

// Appends one tuple per row of `batch` (rows [0, num_rows)) holding the columns `columns` (indices
// into the batch, in that order; a column may appear more than once), each value in its type's
// binary send format. On an error `out` is left as it was. kInvalidArgument for a value PostgreSQL
// would refuse, the message naming the column (schema field name), the row (1-based, "row 3 of
// the batch"), the problem and the fix:
//   - a string with a NUL byte (PostgreSQL text cannot hold \0),
//   - a date outside 4714-11-24 BC .. 5874897-12-31 or a timestamp before 4714-11-24 BC (every
//     later timestamp ferry can hold, up to about year 294247, fits PostgreSQL's range),
//   - a time of day outside 00:00:00 .. 24:00:00,
//   - a decimal with more digits than its type's precision (a corrupt batch; checked anyway).
// kInternal for an index past the batch's columns or a column shorter than the batch.
Status AppendCopyRows(const Batch& batch, const std::vector<size_t>& columns, std::string* out);

// One value's binary send form (no length prefix) appended to `out`, for parameters of
// binary-format queries (e.g. a key lookup): the same bytes AppendCopyRows writes for it. The row
// must exist and not be NULL (kInternal otherwise). Errors as AppendCopyRows's, the message naming
// the problem but not the column or row; on an error `out` is left as it was.
Status AppendPgValue(const Column& col, size_t row, std::string* out);

}  // namespace ferry::sink::pg
