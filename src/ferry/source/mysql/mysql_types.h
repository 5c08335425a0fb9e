// The MySQL/MariaDB source's type map, without a connection (unit tests need no server): a
// column as information_schema.COLUMNS describes it → its Iceberg type, the SELECT expression that
// reads it exactly in the text protocol, and the conversion of that text into a batch column.
// Also what a column may be as a cursor and as a chunk key, and the literal form of a value the
// server printed, for the statements that compare with it. The mapping is documented in
// docs/type-mapping.md.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "ferry/base/status.h"
#include "ferry/types/batch.h"
#include "ferry/types/data_type.h"

namespace ferry::source {

// How a column's values travel (the text the server sends for the SELECT expression) and which
// conversion they take.
enum class MysqlWire : uint8_t {
  kInt32,          // tinyint..mediumint (signed or not), int: decimal digits
  kInt64,          // int unsigned, bigint
  kUnsigned64,     // bigint unsigned → decimal(20,0)
  kFloat,          // float, read as CAST(c AS DOUBLE): the float's exact value
  kDouble,         // double: the shortest text that reads back as the same double
  kDecimal,        // decimal(p,s), p <= 38
  kDecimalText,    // decimal(p,s), p > 38: the server's exact text, as a string
  kBitBool,        // bit(1) → boolean, read as CAST(c AS UNSIGNED)
  kBitInt,         // bit(2..63) → long, as CAST(c AS UNSIGNED)
  kBitUnsigned64,  // bit(64) → decimal(20,0), as CAST(c AS UNSIGNED)
  kDate,           // date; zero dates → NULL
  kDatetime,       // datetime(0..6) → timestamp; zero dates → NULL
  kTimestamp,  // timestamp(0..6) → timestamptz (the session's time zone is UTC); zero → NULL
  kTime,       // time(0..6) → long: signed microseconds (-838:59:59 .. 838:59:59)
  kYear,       // year → int (0000 as 0)
  kText,       // char, varchar, text types, enum, set, json, inet4/inet6 → string (UTF-8)
  kBinary,     // binary, varbinary, blob types → binary
  kUuid,       // MariaDB uuid → uuid
};

// A column as information_schema.COLUMNS describes it.
struct MysqlColumn {
  std::string name;
  std::string data_type;    // DATA_TYPE, lower case: "bigint", "datetime", "longtext"
  std::string column_type;  // COLUMN_TYPE: "bigint(20) unsigned", "decimal(65,30)", "bit(5)"
  bool nullable = true;     // IS_NULLABLE
  int64_t precision = 0;    // NUMERIC_PRECISION (decimal digits; bits for bit(n))
  int64_t scale = 0;        // NUMERIC_SCALE
  int key_position = 0;     // 1.. in the primary key, 0 when not a key column
  // CHARACTER_SET_NAME ("utf8mb4", "latin1", ...) of text columns; empty for others. The snapshot
  // receives text converted to utf8mb4 by the server; the binary log holds it in this character
  // set.
  std::string charset;
};

struct MysqlMapping {
  DataType type;
  MysqlWire wire = MysqlWire::kText;
  // Whether the Iceberg column may hold NULL: a NOT NULL date, datetime or timestamp column that
  // is not a key column may still hold zero dates, which are read as NULL.
  bool nullable = true;
  std::string error;  // why the column cannot be read (the table is listed with it)
};
MysqlMapping MapMysqlColumn(const MysqlColumn& c);

// The SELECT expression that reads column `name` (quoted inside) in the form `wire` converts.
std::string MysqlSelectExpression(std::string_view name, MysqlWire wire);

// Appends the server's text of one value (nullopt: NULL) to `col` (the mapping's type). A value
// that does not convert exactly is kInvalidArgument saying why (without naming the column: the
// caller adds table, column and row).
Status AppendMysqlValue(MysqlWire wire, std::optional<std::string_view> text, Column* col);

// A value in ferry's binary form: what its text converts to, without the text (the binary log's
// decoder gives the common types so; binlog_events.h, RowDecoder::SetTypedColumns). An integer
// is held in the fewest little-endian bytes that keep its sign (1 to 8; 1 to 16 for a
// decimal's), so a value takes no more room than its text. Per wire:
//   kInt32, kInt64        the value
//   kDecimal              the unscaled value, then one byte: its scale
//   kDate                 days since 1970-01-01
//   kDatetime, kTimestamp microseconds since 1970-01-01 00:00 (UTC)
// Zero dates have no binary form: they are NULL, as their text converts.
void PutMysqlBinaryInt64(int64_t v, std::string* out);  // *out = the binary form of v
void PutMysqlBinaryDecimal(int128_t unscaled, int scale, std::string* out);
std::string MysqlBinaryInt64(int64_t v);
std::string MysqlBinaryDecimal(int128_t unscaled, int scale);
// Appends a value in binary form to `col`, converted and checked as AppendMysqlValue converts its
// text (the same refusals: an int that does not fit 32 bits, a decimal beyond the column's
// precision or with more fraction digits than its scale).
Status AppendMysqlBinary(MysqlWire wire, std::string_view bytes, Column* col);

// Whether `text` is a MySQL zero date or a date with a zero month or day ("0000-00-00",
// "2024-00-15 10:00:00"): what MySQL itself treats as NULL (`c IS NULL` holds for it).
bool IsZeroDate(std::string_view text);

// Microseconds of a MySQL TIME's text "[-]H..H:MM:SS[.ffffff]".
Result<int64_t> ParseMysqlTime(std::string_view text);

// How a column serves as an incremental cursor.
struct MysqlCursor {
  enum class Kind { kInteger, kNumber, kText, kRefused } kind = Kind::kRefused;
  bool candidate = false;  // suggested by discover
  std::string why;         // kRefused: the reason
};
MysqlCursor ClassifyMysqlCursor(const MysqlColumn& c, MysqlWire wire);

// Whether the server's order of a primary key column can be compared with literals of its
// printed values (chunk boundaries): integers, decimals, dates and times, text (not enum or set),
// binary (as hex), uuid. Floats, bits, enums, sets and json cannot.
bool MysqlRangeKey(const MysqlColumn& c, MysqlWire wire);
// The SELECT expression that gives a key column's value as the text a boundary keeps (binary as
// HEX()).
std::string MysqlKeyExpression(std::string_view name, MysqlWire wire);

// The literal a key boundary or cursor value `text` (as MysqlKeyExpression or the cursor read
// printed it) takes in a comparison with a column of `wire`: numbers unquoted (a quoted number
// would be compared as a double), binary as X'...', everything else quoted by `quote` (the
// connection's escaping). kInvalidArgument when the text is not of that form (a damaged state
// file or marker).
Result<std::string> MysqlLiteral(MysqlWire wire, std::string_view text,
                                 const std::function<std::string(std::string_view)>& quote);

}  // namespace ferry::source
