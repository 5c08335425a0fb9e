// PostgreSQL's COPY ... TO STDOUT (FORMAT binary) stream, decoded straight into columnar batches.
//
// The stream: the signature "PGCOPY\n\377\r\n\0", an Int32 flags word, an Int32 header-extension
// length and its bytes; then per tuple an Int16 field count and per field an Int32 length (-1 =
// NULL) followed by the value in its type's binary "send" format; finally an Int16 -1 trailer.
// Integers are big-endian. Each column's wire form (PgWire) is known from discovery.
//
// Every read is bounded by the bytes at hand: truncated or malformed input is kCorruption, never a
// crash or an over-read. A well-formed value that the Iceberg type cannot hold exactly (NaN in a
// numeric(p,s), an infinite date, 24:00:00, ...) is kInvalidArgument with the fix in the message.
// Not thread-safe; one decoder per COPY.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/base/status.h"
#include "ferry/types/batch.h"

namespace ferry::pg {

// How a column's values arrive (the base type's send format) and how they are stored.
enum class PgWire : uint8_t {
  kBool,            // 1 byte                                -> boolean
  kInt2,            // Int16                                 -> int
  kInt4,            // Int32                                 -> int
  kInt8,            // Int64                                 -> long
  kOid,             // UInt32                                -> long
  kFloat4,          // IEEE 754 single                       -> float
  kFloat8,          // IEEE 754 double                       -> double
  kNumericDecimal,  // base-10000 numeric                    -> decimal(p,s), exact or refused
  kNumericText,     // base-10000 numeric                    -> string, its exact text
  kText,            // bytes in the client encoding (UTF8)   -> string
  kBytea,           // raw bytes                             -> binary
  kJsonb,           // version byte 1 + JSON text            -> string
  kDate,            // Int32 days since 2000-01-01           -> date
  kTime,            // Int64 µs since midnight               -> time
  kTimeTz,          // Int64 µs + Int32 zone (seconds west)  -> string "HH:MM:SS[.f]+HH[:MM]"
  kTimestamp,       // Int64 µs since 2000-01-01 00:00       -> timestamp
  kTimestampTz,     // Int64 µs since 2000-01-01 00:00 UTC   -> timestamptz
  kInterval,        // Int64 µs, Int32 days, Int32 months    -> string, ISO 8601 (iso_8601 style)
  kUuid,            // 16 bytes                              -> uuid
  kTid,             // UInt32 block + UInt16 offset          -> (row locator, not stored)
};

// A one-dimensional array of an element wire form (array_send: Int32 ndim, Int32 has-NULL flag,
// UInt32 element OID, per dimension Int32 size and Int32 lower bound, then per element an Int32
// length, -1 for NULL, and the element's send format) -> Iceberg list of the element's type.
// The array wire is the element's with kArrayWireBit set; PgArrayOf/IsPgArray/PgElementOf build
// and take it apart. An empty array (ndim 0) is an empty list. More than one dimension is
// refused (kInvalidArgument naming the fix); a lower bound other than 1 is not kept (the
// elements keep their order).
constexpr uint8_t kArrayWireBit = 0x80;
constexpr PgWire PgArrayOf(PgWire element) {
  return static_cast<PgWire>(static_cast<uint8_t>(element) | kArrayWireBit);
}
constexpr bool IsPgArray(PgWire w) { return (static_cast<uint8_t>(w) & kArrayWireBit) != 0; }
constexpr PgWire PgElementOf(PgWire w) {
  return static_cast<PgWire>(static_cast<uint8_t>(w) & ~kArrayWireBit);
}

// One field of the COPY's tuples. `column` is the batch column it fills, or -1 for a locator
// field (a ctid selected to name rows in errors).
struct CopyField {
  std::string name;
  PgWire wire = PgWire::kText;
  int column = -1;
};

class CopyBinaryDecoder {
 public:
  explicit CopyBinaryDecoder(std::vector<CopyField> fields);

  // Appends `data` to what is buffered and decodes every complete tuple into `batch` (whose
  // columns match the fields' targets). Bytes of an incomplete tuple stay buffered for the next
  // call. After an error the decoder must not be used again.
  Status Feed(std::string_view data, Batch* batch);
  // The stream ended: the trailer must have been seen, with nothing after it.
  Status Finish() const;

  int64_t rows() const { return rows_; }
  // Where the last tuple decoded (or failing) is: "ctid (3,7)" when a kTid field precedes the
  // failing one, else "row <n> of the chunk".
  std::string RowLocation() const;

 private:
  Status DecodeTuple(std::string_view tuple, Batch* batch);

  std::vector<CopyField> fields_;
  std::string buffer_;
  size_t pos_ = 0;
  bool header_done_ = false;
  bool trailer_seen_ = false;
  int64_t rows_ = 0;
  bool have_tid_ = false;
  uint32_t tid_block_ = 0;
  uint16_t tid_offset_ = 0;
};

// One value in its type's binary send format (as COPY binary and binary-mode pgoutput carry it),
// appended to `col`. kCorruption for malformed bytes, kInvalidArgument for a value the column's
// Iceberg type cannot hold exactly; the message names the problem, not the column or row. On an
// error nothing is appended. An array wire (IsPgArray) appends one list row to a list column.
Status DecodePgValue(PgWire wire, std::string_view value, Column* col);

// A log older than an ALTER COLUMN ... TYPE carries the column's values in the send format of
// its old type. Whether a value sent as `from` can be rewritten exactly in the send format of `to`:
// the same form, or a wider integer or float (int2 -> int4 -> int8, oid -> int8, float4 ->
// float8). Arrays only as they are.
bool PgWireWidens(PgWire from, PgWire to);
// Rewrites `value`, sent as `from`, in the send format of `to`. kInvalidArgument unless
// PgWireWidens(from, to); kCorruption for a value whose size is not its form's.
Status WidenPgValue(PgWire from, PgWire to, std::string* value);

// Numeric send format -> unscaled integer at `scale` with at most `precision` digits. NaN and
// ±Infinity, digits beyond the scale and too many digits are refused (kInvalidArgument).
Result<int128_t> NumericToDecimal(std::string_view value, int precision, int scale);
// Numeric send format -> PostgreSQL's exact text ("-12.3400", "NaN", "Infinity", "-Infinity").
Result<std::string> NumericToText(std::string_view value);
// timetz send format -> "HH:MM:SS[.ffffff]±HH[:MM[:SS]]", as PostgreSQL prints it.
std::string TimeTzToText(int64_t micros, int32_t zone_seconds_west);
// interval send format -> PostgreSQL's IntervalStyle iso_8601 text ("P1Y2M3DT4H5M6.5S", "PT0S").
std::string IntervalToText(int64_t micros, int32_t days, int32_t months);

}  // namespace ferry::pg
