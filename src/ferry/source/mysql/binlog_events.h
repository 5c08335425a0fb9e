// The MySQL/MariaDB binary log, decoded from the raw bytes of its events (no client library: the
// connection only frames events). What a CDC reader needs: the event header and checksum, the
// format description, rotations, transaction boundaries (QUERY BEGIN/COMMIT, XID, MariaDB GTID),
// table maps and the row images of WRITE/UPDATE/DELETE_ROWS events (v1, MariaDB; v2, MySQL).
//
// Row values come out as the exact text the snapshot's SELECT reads for the column (mysql_types.h:
// MysqlSelectExpression), so AppendMysqlValue converts a change exactly as it converts a snapshot
// row: one conversion for both. Text columns are converted from their character set to UTF-8.
//
// Every length is checked against the bytes there are: a damaged or truncated event is
// kCorruption naming the event and what is wrong, never a read past its end (fuzz_binlog.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ferry/base/status.h"
#include "ferry/source/mysql/mysql_types.h"

namespace ferry::source::binlog {

// Event types (the header's type byte).
enum EventType : uint8_t {
  kQueryEvent = 2,
  kStopEvent = 3,
  kRotateEvent = 4,
  kFormatDescriptionEvent = 15,
  kXidEvent = 16,
  kTableMapEvent = 19,
  kWriteRowsV1 = 23,
  kUpdateRowsV1 = 24,
  kDeleteRowsV1 = 25,
  kHeartbeatEvent = 27,
  kWriteRowsV2 = 30,
  kUpdateRowsV2 = 31,
  kDeleteRowsV2 = 32,
  kMysqlGtidEvent = 33,
  kAnonymousGtidEvent = 34,
  kPreviousGtidsEvent = 35,
  kTransactionPayloadEvent = 40,
  kHeartbeatV2Event = 41,
  kAnnotateRowsEvent = 160,
  kBinlogCheckpointEvent = 161,
  kMariaGtidEvent = 162,
  kMariaGtidListEvent = 163,
  kStartEncryptionEvent = 164,
  kQueryCompressedEvent = 165,
  kWriteRowsCompressedV1 = 169,
  kUpdateRowsCompressedV1 = 170,
  kDeleteRowsCompressedV1 = 171,
};

// The 19 bytes every event starts with (little-endian).
struct EventHeader {
  uint32_t timestamp = 0;
  uint8_t type = 0;
  uint32_t server_id = 0;
  uint32_t event_size = 0;  // the whole event: header, body and checksum
  uint32_t log_pos = 0;     // where the next event starts in the file (0: an artificial event)
  uint16_t flags = 0;
};
constexpr size_t kEventHeaderSize = 19;
constexpr uint16_t kArtificialEventFlag = 0x20;  // LOG_EVENT_ARTIFICIAL_F

// What the FORMAT_DESCRIPTION event says of the events after it.
struct FormatDescription {
  uint16_t binlog_version = 4;
  std::string server_version;  // "10.11.6-MariaDB-0+deb12u1-log"
  bool checksum = false;       // events end with a CRC32 of everything before it
  // Post-header length of each event type (index: type - 1), as the event lists them.
  std::vector<uint8_t> post_header_len;
};

// The header of the whole event `event` (header, body and, when fd.checksum, the CRC32, which is
// verified), and its body (without header and checksum). kCorruption on a short event, an
// event_size that is not event.size(), or a checksum that does not match.
Status ParseEvent(std::string_view event, const FormatDescription& fd, EventHeader* header,
                  std::string_view* body);
// A FORMAT_DESCRIPTION event, whole: it says itself whether it (and what follows) has a checksum,
// which is verified.
Result<FormatDescription> ParseFormatDescription(std::string_view event);

struct Rotate {
  uint64_t position = 0;  // where the next event is in `file`
  std::string file;       // "binlog.000003"
};
Result<Rotate> ParseRotate(std::string_view body);

// QUERY: BEGIN, COMMIT, ROLLBACK, DDL, TRUNCATE ...
struct Query {
  uint32_t thread_id = 0;
  uint16_t error_code = 0;
  std::string database;  // the session's default database (empty: none)
  std::string sql;       // as the server logged it (in the session's character set)
};
Result<Query> ParseQuery(std::string_view body, const FormatDescription& fd);

// XID: the commit of a transaction on a transactional engine.
Result<uint64_t> ParseXid(std::string_view body);

// MariaDB GTID (the start of an event group): domain-server-sequence.
struct MariaGtid {
  uint64_t sequence = 0;
  uint32_t domain = 0;
  uint32_t server_id = 0;  // from the header
  uint8_t flags = 0;
  // FL_STANDALONE: the group is one statement (DDL) without BEGIN and XID/COMMIT: it ends after
  // its QUERY event.
  bool standalone() const { return (flags & 1) != 0; }
};
Result<MariaGtid> ParseMariaGtid(const EventHeader& header, std::string_view body);

// MySQL GTID (the start of a transaction): source uuid and transaction number.
struct MysqlGtid {
  std::string uuid;  // "3e11fa47-71ca-11e1-9e33-c80aa9429562"
  int64_t number = 0;
};
Result<MysqlGtid> ParseMysqlGtid(std::string_view body);

// One column of a TABLE_MAP event.
struct MapColumn {
  uint8_t type = 0;   // the column's real type (MYSQL_TYPE_*): for a CHAR-packed ENUM or SET
                      // (MYSQL_TYPE_STRING with the real type in the metadata) the real one
  uint16_t meta = 0;  // its metadata, as the type reads it (CHAR: the length in bytes)
  bool nullable = true;
};
struct TableMap {
  uint64_t table_id = 0;  // 6 bytes; what ROWS events name
  uint16_t flags = 0;
  std::string database;
  std::string table;
  std::vector<MapColumn> columns;
  // Optional metadata (binlog_row_metadata = MINIMAL or FULL): empty when not logged.
  std::vector<bool> is_unsigned;          // per column, numeric ones: whether unsigned
  std::vector<std::string> column_names;  // FULL only
  // FULL only: per column, the labels of an ENUM or SET column (bytes in the column's character
  // set; empty for other columns). information_schema's COLUMN_TYPE holds labels in utf8mb3,
  // where a 4-byte character is '?': these are exact.
  std::vector<std::vector<std::string>> labels;
};
Result<TableMap> ParseTableMap(std::string_view body, const FormatDescription& fd);

// A WRITE/UPDATE/DELETE_ROWS event (v1 or v2), its rows not yet decoded.
struct RowsEvent {
  enum class Kind { kWrite, kUpdate, kDelete } kind = Kind::kWrite;
  uint64_t table_id = 0;
  uint16_t flags = 0;  // 1: STMT_END_F (the statement's last rows event)
  size_t column_count = 0;
  std::vector<bool> present;        // the columns in each (before) image
  std::vector<bool> present_after;  // UPDATE: the columns in each after image
  std::string_view rows;            // the row images, back to back (a view into the body)
};
// Whether `type` is a ROWS event this parser reads (v1, v2; not compressed).
bool IsRowsEvent(uint8_t type);
Result<RowsEvent> ParseRowsEvent(const EventHeader& header, std::string_view body,
                                 const FormatDescription& fd);

// How the snapshot reads a column (discovery's MysqlColumn and its wire form): what the text of a
// value decoded from the log must look like, and the character set text arrives in. Enum and set
// labels come from the column's COLUMN_TYPE (from the table map when it carries them).
struct ColumnForm {
  MysqlColumn column;
  MysqlWire wire = MysqlWire::kText;
};

// One decoded row image: per table-map column, the value's text as the snapshot's SELECT reads it
// (nullopt: NULL, or a column absent from the image). Views valid during the callback only.
using RowImage = std::vector<std::optional<std::string_view>>;

// Decodes every row of `rows` with `map` (the TABLE_MAP of its table_id) and `forms` (per map
// column, in the same order; forms.size() must be map.columns.size()). `each(before, after)`:
// WRITE gives the row as `after` (before empty), DELETE as `before` (after empty), UPDATE both.
// A value whose type or metadata does not agree with its form, or text that is not valid in its
// character set, is kInvalidArgument naming the column; bytes that run out kCorruption. What the
// log cannot give as the snapshot's text (MySQL's binary JSON, geometry, a character set iconv
// lacks, MariaDB's pre-10.1 fractional temporal format) is kNotSupported naming the column.
Status DecodeRows(const RowsEvent& rows, const TableMap& map, const std::vector<ColumnForm>& forms,
                  const std::function<Status(const RowImage& before, const RowImage& after)>& each);

// DecodeRows for the events of one table map: the columns' set-up (character set converters,
// enum and set labels) is made once, not per event. Make checks `forms` against `map` as
// DecodeRows does.
class RowDecoder {
 public:
  static Result<std::unique_ptr<RowDecoder>> Make(TableMap map, std::vector<ColumnForm> forms);
  ~RowDecoder();
  RowDecoder(const RowDecoder&) = delete;
  RowDecoder& operator=(const RowDecoder&) = delete;

  // `rows` must be of this decoder's table id (its columns are checked against the map).
  Status Decode(const RowsEvent& rows,
                const std::function<Status(const RowImage& before, const RowImage& after)>& each);
  const TableMap& map() const;
  // UPDATE rows' before images: only the map columns marked in `columns` are decoded (a
  // follower needs the key's, to tell whether it moved); the others are read past and read as
  // nullopt. Empty: every column (the default). WRITE and DELETE images are always whole.
  void SetBeforeColumns(std::vector<bool> columns);
  // During Decode's callback of an UPDATE row: its whole before image, decoded now (valid until
  // the callback returns).
  Result<const RowImage*> FullBefore();
  // Columns (map order) whose values may be given in ferry's binary form (mysql_types.h,
  // AppendMysqlBinary) instead of their text: of those marked, every one whose wire has a binary
  // form and whose type in the log always fits it. A follower leaves its key columns out (a
  // key's bytes must not depend on the form). Empty: none (the default).
  void SetTypedColumns(const std::vector<bool>& allowed);
  // Per map column: whether its values come in binary form.
  std::vector<bool> typed() const;

 private:
  struct Impl;
  explicit RowDecoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ferry::source::binlog
