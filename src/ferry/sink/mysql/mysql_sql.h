// SQL text for the MySQL/MariaDB destination, without a connection (so unit tests need no server):
// identifiers, the column types ferry creates, the literal form of every value, the values read
// back from the server's text forms, and the destination URL. The type mapping is documented in
// mysql_sink.h.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/base/status.h"
#include "ferry/clients/mysql/mysql_server.h"
#include "ferry/types/batch.h"
#include "ferry/types/type_change.h"

namespace ferry::sink::mysql {

// The client's names (Connection, Flavor, QuoteIdent, ParseUrl) are this namespace's too.
using namespace ferry::mysql;

// Longest identifier MySQL and MariaDB accept (characters, not bytes).
inline constexpr size_t kMaxIdentifierChars = 64;
// Longest InnoDB index key (row format DYNAMIC, the default since MySQL 5.7 / MariaDB 10.2): the
// bytes of all primary-key columns together.
inline constexpr int kMaxKeyBytes = 3072;

// `db`.`table`
std::string Qualified(std::string_view db, std::string_view table);
// Characters (code points) of UTF-8 text.
size_t Utf8Chars(std::string_view s);
// kInvalidArgument naming the name and the fix when MySQL/MariaDB cannot take it as a table or
// column name: empty, longer than 64 characters, a NUL, or a trailing space. `what`: "table",
// "column".
Status CheckIdentifier(std::string_view name, std::string_view what);

// How one column is declared and bounded.
struct ColumnSpec {
  std::string type;           // "BIGINT", "VARCHAR(768) CHARACTER SET utf8mb4 COLLATE ..."
  std::string comment;        // the ferry type where the declared type is ambiguous, else empty
  int64_t max_key_chars = 0;  // key string columns: longest value in characters
  int64_t max_key_bytes = 0;  // key binary columns: longest value in bytes
};

// The declared types of `schema`'s columns (same order). Key columns of string and binary type get
// VARCHAR/VARBINARY lengths that share the 3072 key bytes left by the other key columns.
// kInvalidArgument when a key column cannot be a key (a list) or the key leaves no room.
Result<std::vector<ColumnSpec>> ColumnSpecs(const Schema& schema, const Flavor& flavor);

// "`name` TYPE [NOT NULL] [COMMENT '...']"
std::string ColumnDefinition(const Field& f, const ColumnSpec& spec, bool not_null);

// The ferry type a column comment names ("ferry:timestamptz"), or an error when it names none.
inline constexpr std::string_view kCommentPrefix = "ferry:";
Result<DataType> TypeFromComment(std::string_view comment);

// The ferry type of a column as information_schema.COLUMNS describes it (the comment wins when it
// names a ferry type). kNotSupported for types ferry cannot read (geometry, bit, ...).
struct ServerColumn {
  std::string name;
  std::string data_type;    // DATA_TYPE, lower case: "bigint", "datetime"
  std::string column_type;  // COLUMN_TYPE: "tinyint(1)", "bigint(20) unsigned", "decimal(12,2)"
  std::string comment;
  bool nullable = true;
  int64_t precision = 0;  // NUMERIC_PRECISION
  int64_t scale = 0;      // NUMERIC_SCALE
  int key_position = 0;   // 1.. in the primary key, 0 when not a key column
};
Result<DataType> TypeOfServerColumn(const ServerColumn& c);
// How a target column `have` takes values of ferry type `want` when the table is updated in
// place: the one rule of types/type_change.h on the column's ferry type (TypeOfServerColumn);
// kRefused when ferry cannot read the column's type.
TypeChange CompareColumnType(const ServerColumn& have, const DataType& want);
// The SELECT expression that reads column `c` (of ferry type `t`) back exactly: FLOAT columns are
// widened to DOUBLE (the server prints FLOAT with 6 digits only).
std::string ReadExpression(const ServerColumn& c, const DataType& t);

// Appends a value read back in the server's text form to `col` (of the column's ferry type); an
// error says why the text does not fit.
Status AppendServerText(std::string_view text, Column* col);

// A list value as JSON text: booleans and numbers as JSON (NaN, Infinity, -Infinity as strings),
// binary as base64 strings, every other element as a string in its ISO text form.
Result<std::string> ListJson(const Column& list, size_t row);
// The reverse: appends a list row to `col` (a list column).
Status AppendListJson(std::string_view json, Column* col);

// SQL literals of a batch's rows, for INSERT ... VALUES.
class RowEncoder {
 public:
  // Appends `in` escaped for a quoted string literal (without the quotes); the connection's
  // mysql_real_escape_string, which knows the server's character set and sql_mode.
  using Escaper = std::function<void(std::string_view in, std::string* out)>;

  // `table`: the table's name for messages ("shop.orders").
  RowEncoder(std::shared_ptr<const Schema> schema, std::vector<ColumnSpec> specs, Escaper escape,
             std::string table);

  // Appends "(v1,v2,...)" for row `row` of `batch`, columns `cols`. kInvalidArgument naming the
  // column, the row (by key when the table has one) and the fix for a value the column cannot
  // hold: NaN or ±Infinity, a date or timestamp outside years 1000..9999, a key too long.
  Status AppendRow(const Batch& batch, size_t row, const std::vector<size_t>& cols,
                   std::string* out) const;

 private:
  Status AppendValue(const Column& col, size_t row, size_t field, std::string* out) const;
  std::string RowText(const Batch& batch, size_t row) const;

  std::shared_ptr<const Schema> schema_;
  std::vector<ColumnSpec> specs_;
  Escaper escape_;
  std::string table_;
  std::vector<size_t> keys_;
};

// Formats a double so that the server reads back exactly the same value ("%.17g").
std::string DoubleText(double d);

}  // namespace ferry::sink::mysql
