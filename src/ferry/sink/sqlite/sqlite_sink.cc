#include "ferry/sink/sqlite/sqlite_sink.h"

#include <sqlite3.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "ferry/base/fault.h"
#include "ferry/base/fs.h"
#include "ferry/base/log.h"
#include "ferry/base/uuid.h"
#include "ferry/clients/sqlite/sqlite.h"
#include "ferry/sink/sink_util.h"
#include "ferry/types/type_change.h"
#include "ferry/types/value_json.h"
#include "ferry/types/value_parse.h"
#include "ferry/types/value_text.h"

namespace ferry::sink {
namespace {

using sqlite::Database;
using sqlite::Statement;

constexpr int kBusyTimeoutMs = 60000;
constexpr size_t kReadBatchRows = 8192;
// The text stored for -0.0 (as a BLOB, see the header) and NaN.
constexpr std::string_view kNegativeZero = "-0.0";
constexpr std::string_view kNaN = "NaN";

// ---- names ----

std::string Q(std::string_view name) { return sqlite::QuoteIdentifier(name); }
// Tables are always qualified: an unqualified name would find a TEMP table of the same name first.
std::string MainTable(std::string_view name) { return "main." + Q(name); }

std::string LoadTableName(const std::string& pipeline, const std::string& stream,
                          const std::string& run) {
  std::string key = pipeline;
  key += '\0';
  key += stream;
  key += '\0';
  key += run;
  return "ferry_load_" + Hex16(Fnv1a64(key));
}

std::string NowText() { return FormatTimestampIso(NowMs() * 1000) + "+00:00"; }

// ---- the columns record: the table's ferry schema as JSON ----

Result<std::string> ColumnsText(const Schema& s) {
  return DumpJson(ColumnsJson(s), "the column names");
}

Result<Schema> SchemaFromColumns(const std::string& text, const std::string& table,
                                 const std::string& pipeline) {
  const std::string what =
      "ferry_state's columns of table " + Q(table) + " (pipeline '" + pipeline + "') ";
  Json arr = Json::parse(text, nullptr, false);
  if (arr.is_discarded() || !arr.is_array()) {
    return Status::Corruption(what + "are not a JSON array");
  }
  try {
    auto s = SchemaFromColumnsJson(arr);
    if (!s.ok()) return Status::Corruption(what + s.status().message());
    return s;
  } catch (const Json::exception& e) {
    return Status::Corruption(what + "do not have the expected form: " + e.what());
  }
}

// ---- DDL ----

// Declared types: text-stored types are TEXT so that affinity never converts them.
const char* DeclaredType(const DataType& t) {
  switch (t.kind()) {
    case TypeKind::kBoolean:
    case TypeKind::kInt32:
    case TypeKind::kInt64:
      return "INTEGER";
    case TypeKind::kFloat32:
    case TypeKind::kFloat64:
      return "REAL";
    case TypeKind::kBinary:
      return "BLOB";
    default:
      return "TEXT";
  }
}

std::string ColumnDefinition(const Field& f, bool not_null) {
  return Q(f.name) + " " + DeclaredType(f.type) + (not_null ? " NOT NULL" : "");
}

// CREATE TABLE main."name" (...) for `s`: NOT NULL for required and key columns, the key as the
// PRIMARY KEY.
std::string CreateTableSql(const std::string& name, const Schema& s) {
  std::string sql = "CREATE TABLE " + MainTable(name) + " (";
  for (size_t i = 0; i < s.fields.size(); ++i) {
    const Field& f = s.fields[i];
    sql += (i ? ", " : "") + ColumnDefinition(f, f.required || IsKey(s, f.id));
  }
  std::vector<std::string> keys = KeyNames(s);
  if (!keys.empty()) {
    sql += ", PRIMARY KEY (";
    for (size_t i = 0; i < keys.size(); ++i) sql += (i ? ", " : "") + Q(keys[i]);
    sql += ")";
  }
  return sql + ")";
}

// ---- connections and transactions ----

Result<std::unique_ptr<Database>> Connect(const std::string& path, bool create) {
  FERRY_ASSIGN_OR_RETURN(auto db, Database::Open(path, create ? Database::Mode::kReadWriteCreate
                                                              : Database::Mode::kReadWrite));
  sqlite3_busy_timeout(db->raw(), kBusyTimeoutMs);
  // synchronous=FULL: a commit is durable before the engine writes its state file.
  // temp_store=FILE: staged rows spill to a temporary file, so memory stays bounded.
  // legacy_alter_table=ON: RENAME leaves views and triggers that name the target alone (they go on
  // naming it and so see the table renamed in its place), where the modern RENAME would refuse
  // because the view's table was just dropped.
  FERRY_RETURN_IF_ERROR(
      db->Exec("PRAGMA synchronous=FULL; PRAGMA temp_store=FILE; PRAGMA legacy_alter_table=ON"));
  return db;
}

// A write transaction (BEGIN IMMEDIATE: the write lock is taken at once, waiting up to the busy
// timeout for other writers), rolled back unless committed.
class WriteTxn {
 public:
  explicit WriteTxn(Database* db) : db_(db) {}
  ~WriteTxn() { Rollback(); }
  WriteTxn(const WriteTxn&) = delete;
  WriteTxn& operator=(const WriteTxn&) = delete;

  Status Begin() {
    FERRY_RETURN_IF_ERROR(db_->Exec("BEGIN IMMEDIATE"));
    open_ = true;
    return Status::OK();
  }
  Status Commit() {
    Status s = db_->Exec("COMMIT");
    if (s.ok()) {
      open_ = false;
      return s;
    }
    Rollback();
    // A write error during COMMIT may leave the commit record on disk: read the marker back.
    if (s.code() == StatusCode::kIOError) {
      return Status::CommitStateUnknown(s.message() +
                                        " (the commit may have landed; read the marker back)");
    }
    return s;
  }
  void Rollback() {
    if (open_ && sqlite3_get_autocommit(db_->raw()) == 0) (void)db_->Exec("ROLLBACK");
    open_ = false;
  }

 private:
  Database* db_;
  bool open_ = false;
};

Status BindText(Statement& st, int i, std::string_view v) {
  int rc = sqlite3_bind_text64(st.raw(), i, v.data() ? v.data() : "", v.size(), SQLITE_TRANSIENT,
                               SQLITE_UTF8);
  if (rc != SQLITE_OK) return Status::InvalidArgument(sqlite3_errstr(rc));
  return Status::OK();
}

Result<bool> TableExists(Database& db, const std::string& name) {
  FERRY_ASSIGN_OR_RETURN(
      Statement st,
      db.Prepare("SELECT 1 FROM main.sqlite_schema WHERE type = 'table' AND name = ?1 COLLATE "
                 "NOCASE"));
  FERRY_RETURN_IF_ERROR(BindText(st, 1, name));
  return st.Step();
}

Result<bool> TableHasRows(Database& db, const std::string& name) {
  FERRY_ASSIGN_OR_RETURN(Statement st, db.Prepare("SELECT 1 FROM " + MainTable(name) + " LIMIT 1"));
  return st.Step();
}

struct StateRow {
  bool found = false;
  std::string marker;
  std::string columns;
};

Result<StateRow> ReadState(Database& db, const std::string& pipeline, const std::string& split) {
  FERRY_ASSIGN_OR_RETURN(
      Statement st,
      db.Prepare(
          "SELECT marker, columns FROM main.ferry_state WHERE pipeline = ?1 AND split = ?2"));
  FERRY_RETURN_IF_ERROR(BindText(st, 1, pipeline));
  FERRY_RETURN_IF_ERROR(BindText(st, 2, split));
  StateRow row;
  FERRY_ASSIGN_OR_RETURN(row.found, st.Step());
  if (row.found) {
    row.marker = std::string(st.Text(0));
    row.columns = std::string(st.Text(1));
  }
  return row;
}

Result<Json> ParseMarker(const StateRow& row, const std::string& table,
                         const std::string& pipeline) {
  if (!row.found) return Json(nullptr);
  Json j = Json::parse(row.marker, nullptr, false);
  if (j.is_discarded()) {
    return Status::Corruption("table " + Q(table) + " has a marker of pipeline '" + pipeline +
                              "' in ferry_state that is not JSON: '" + row.marker.substr(0, 80) +
                              "'");
  }
  return j;
}

// Writes the checkpoint row: marker and updated_at always, columns when `set_columns` (or when
// the row is new).
Status WriteState(Database& db, const std::string& pipeline, const std::string& split,
                  const std::string& marker, const std::string& columns, bool set_columns) {
  FERRY_ASSIGN_OR_RETURN(
      Statement st,
      db.Prepare(
          std::string("INSERT INTO main.ferry_state (pipeline, split, marker, columns, "
                      "updated_at) VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (pipeline, split) "
                      "DO UPDATE SET marker = excluded.marker, updated_at = "
                      "excluded.updated_at") +
          (set_columns ? ", columns = excluded.columns" : "")));
  FERRY_RETURN_IF_ERROR(BindText(st, 1, pipeline));
  FERRY_RETURN_IF_ERROR(BindText(st, 2, split));
  FERRY_RETURN_IF_ERROR(BindText(st, 3, marker));
  FERRY_RETURN_IF_ERROR(BindText(st, 4, columns));
  FERRY_RETURN_IF_ERROR(BindText(st, 5, NowText()));
  return st.Exec();
}

// The SQL of the user's indexes and triggers on `table`, to create them again on a table that
// replaces it.
Result<std::vector<std::string>> UserIndexesAndTriggers(Database& db, const std::string& table) {
  FERRY_ASSIGN_OR_RETURN(
      Statement st, db.Prepare("SELECT sql FROM main.sqlite_schema WHERE type IN ('index', "
                               "'trigger') AND tbl_name = ?1 COLLATE NOCASE AND sql IS NOT NULL "
                               "ORDER BY type, name"));
  FERRY_RETURN_IF_ERROR(BindText(st, 1, table));
  std::vector<std::string> out;
  for (;;) {
    FERRY_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) break;
    out.emplace_back(st.Text(0));
  }
  return out;
}

void CreateAgain(Database& db, const std::string& table, const std::vector<std::string>& sqls) {
  for (const auto& sql : sqls) {
    Status s = db.Exec(sql);
    if (!s.ok()) {
      FERRY_LOG(kWarn) << "table " << Q(table)
                       << " was replaced; this index or trigger of the old table does not apply to "
                          "the new one and was dropped: "
                       << sql << " (" << s.message() << ")";
    }
  }
}

// Replaces `table` with a new table of `schema`, copying the columns `copy` (when any), and keeps
// the user's indexes and triggers. Inside a write transaction.
Status RebuildTable(Database& db, const std::string& table, const Schema& schema,
                    const std::vector<std::string>& copy) {
  const std::string tmp = "ferry_rebuild_" + Hex16(Fnv1a64(table));
  FERRY_RETURN_IF_ERROR(db.Exec("DROP TABLE IF EXISTS " + MainTable(tmp)));
  FERRY_RETURN_IF_ERROR(db.Exec(CreateTableSql(tmp, schema)));
  if (!copy.empty()) {
    std::string cols;
    for (const auto& c : copy) cols += (cols.empty() ? "" : ", ") + Q(c);
    FERRY_RETURN_IF_ERROR(db.Exec("INSERT INTO " + MainTable(tmp) + " (" + cols + ") SELECT " +
                                  cols + " FROM " + MainTable(table)));
  }
  FERRY_ASSIGN_OR_RETURN(auto extras, UserIndexesAndTriggers(db, table));
  FERRY_RETURN_IF_ERROR(db.Exec("DROP TABLE " + MainTable(table)));
  FERRY_RETURN_IF_ERROR(db.Exec("ALTER TABLE " + MainTable(tmp) + " RENAME TO " + Q(table)));
  CreateAgain(db, table, extras);
  return Status::OK();
}

// Errors SQLite reports for a constraint (kAlreadyExists from the wrapper) are the user's data.
Status ConstraintError(const Status& s, const std::string& table, const Schema& schema) {
  if (s.code() != StatusCode::kAlreadyExists) return s;
  std::vector<std::string> keys = KeyNames(schema);
  return Status::InvalidArgument(
      "rows for table " + Q(table) + " break its constraints: " + s.message() +
      (keys.empty() ? std::string()
                    : "; the primary key " + JoinNames(keys) + " must be unique and not NULL") +
      "; required columns must hold values");
}

// ---- values: ferry -> stored ----

double DoubleAt(const Column& col, size_t row) {
  return col.type().kind() == TypeKind::kFloat32 ? static_cast<double>(col.ValueAt<float>(row))
                                                 : col.ValueAt<double>(row);
}

// The text form of a value of a text-stored primitive type (not string, list).
std::string TextOf(const Column& col, size_t row) {
  return FormatTextValue(col, row).value_or(std::string());
}

Result<std::string> ListJson(const Column& col, size_t row) {
  return FormatListJson(
      col, row, [](const Column& c, size_t i) -> Result<std::string> { return TextOf(c, i); });
}

// Binds the stored form of `col`'s row `row` to parameter `i`. `scratch` holds the text until
// the statement has run.
Status BindValue(sqlite3_stmt* st, int i, const Column& col, size_t row, std::string* scratch) {
  int rc = SQLITE_OK;
  auto bind_text = [&](std::string_view v) {
    return sqlite3_bind_text64(st, i, v.data() ? v.data() : "", v.size(), SQLITE_STATIC,
                               SQLITE_UTF8);
  };
  if (!col.IsValid(row)) {
    rc = sqlite3_bind_null(st, i);
  } else {
    switch (col.type().kind()) {
      case TypeKind::kBoolean:
        rc = sqlite3_bind_int64(st, i, col.ValueAt<uint8_t>(row) != 0 ? 1 : 0);
        break;
      case TypeKind::kInt32:
        rc = sqlite3_bind_int64(st, i, col.ValueAt<int32_t>(row));
        break;
      case TypeKind::kInt64:
        rc = sqlite3_bind_int64(st, i, col.ValueAt<int64_t>(row));
        break;
      case TypeKind::kFloat32:
      case TypeKind::kFloat64: {
        const double d = DoubleAt(col, row);
        if (std::isnan(d)) {
          rc = bind_text(kNaN);
        } else if (d == 0 && std::signbit(d)) {
          rc =
              sqlite3_bind_blob64(st, i, kNegativeZero.data(), kNegativeZero.size(), SQLITE_STATIC);
        } else {
          rc = sqlite3_bind_double(st, i, d);
        }
        break;
      }
      case TypeKind::kString:
        rc = bind_text(col.GetBytes(row));
        break;
      case TypeKind::kBinary: {
        std::string_view b = col.GetBytes(row);
        rc = sqlite3_bind_blob64(st, i, b.data() ? b.data() : "", b.size(), SQLITE_STATIC);
        break;
      }
      case TypeKind::kList: {
        FERRY_ASSIGN_OR_RETURN(*scratch, ListJson(col, row));
        rc = bind_text(*scratch);
        break;
      }
      default:
        *scratch = TextOf(col, row);
        rc = bind_text(*scratch);
        break;
    }
  }
  if (rc != SQLITE_OK) {
    return Status::InvalidArgument(std::string("a value cannot be stored: ") + sqlite3_errstr(rc));
  }
  return Status::OK();
}

// ---- values: stored -> ferry ----

std::string Shown(sqlite3_stmt* st, int i) {
  switch (sqlite3_column_type(st, i)) {
    case SQLITE_INTEGER:
      return std::to_string(sqlite3_column_int64(st, i));
    case SQLITE_FLOAT: {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", sqlite3_column_double(st, i));
      return buf;
    }
    case SQLITE_TEXT: {
      const char* p = reinterpret_cast<const char*>(sqlite3_column_text(st, i));
      std::string t(p ? p : "", static_cast<size_t>(sqlite3_column_bytes(st, i)));
      return "'" + t.substr(0, 60) + (t.size() > 60 ? "...'" : "'");
    }
    case SQLITE_BLOB:
      return "a blob of " + std::to_string(sqlite3_column_bytes(st, i)) + " bytes";
    default:
      return "NULL";
  }
}

std::string_view BytesOf(sqlite3_stmt* st, int i) {
  const void* p = sqlite3_column_type(st, i) == SQLITE_BLOB ? sqlite3_column_blob(st, i)
                                                            : sqlite3_column_text(st, i);
  int n = sqlite3_column_bytes(st, i);
  return p ? std::string_view(static_cast<const char*>(p), static_cast<size_t>(n))
           : std::string_view();
}

// A double from its special text forms ("NaN", "-0.0", "Infinity", "-Infinity").
std::optional<double> SpecialDouble(std::string_view t) {
  if (t == kNaN) return std::numeric_limits<double>::quiet_NaN();
  if (t == kNegativeZero) return -0.0;
  if (t == "Infinity") return std::numeric_limits<double>::infinity();
  if (t == "-Infinity") return -std::numeric_limits<double>::infinity();
  return std::nullopt;
}

void AppendDouble(Column* col, double d) {
  if (col->type().kind() == TypeKind::kFloat32) {
    col->AppendFloat(static_cast<float>(d));
  } else {
    col->AppendDouble(d);
  }
}

// Appends the stored value of result column `i` to `col`; an error says why it does not parse.
Status AppendStored(sqlite3_stmt* st, int i, Column* col) {
  const int type = sqlite3_column_type(st, i);
  if (type == SQLITE_NULL) {
    col->AppendNull();
    return Status::OK();
  }
  const DataType& t = col->type();
  const Status wrong = Status::InvalidArgument("");
  switch (t.kind()) {
    case TypeKind::kBoolean: {
      if (type != SQLITE_INTEGER) return wrong;
      int64_t v = sqlite3_column_int64(st, i);
      if (v != 0 && v != 1) return wrong;
      col->AppendBool(v == 1);
      return Status::OK();
    }
    case TypeKind::kInt32: {
      if (type != SQLITE_INTEGER) return wrong;
      int64_t v = sqlite3_column_int64(st, i);
      if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
        return wrong;
      }
      col->AppendInt32(static_cast<int32_t>(v));
      return Status::OK();
    }
    case TypeKind::kInt64:
      if (type != SQLITE_INTEGER) return wrong;
      col->AppendInt64(sqlite3_column_int64(st, i));
      return Status::OK();
    case TypeKind::kFloat32:
    case TypeKind::kFloat64: {
      if (type == SQLITE_FLOAT || type == SQLITE_INTEGER) {
        AppendDouble(col, sqlite3_column_double(st, i));
        return Status::OK();
      }
      auto d = SpecialDouble(BytesOf(st, i));
      if (!d) return wrong;
      AppendDouble(col, *d);
      return Status::OK();
    }
    case TypeKind::kString:
    case TypeKind::kBinary:
      col->AppendBytes(BytesOf(st, i));
      return Status::OK();
    case TypeKind::kDecimal:
      if (type == SQLITE_INTEGER) {
        return AppendTextValue(std::to_string(sqlite3_column_int64(st, i)), col);
      }
      if (type != SQLITE_TEXT) return wrong;
      return AppendTextValue(BytesOf(st, i), col);
    case TypeKind::kList:
      if (type != SQLITE_TEXT) return wrong;
      return AppendListJson(BytesOf(st, i), col, AppendTextValue);
    default:
      if (type != SQLITE_TEXT) return wrong;
      return AppendTextValue(BytesOf(st, i), col);
  }
}

// ---- the reader ----

class SqliteReader final : public TableReader {
 public:
  SqliteReader(std::unique_ptr<Database> db, std::string table,
               std::shared_ptr<const Schema> schema)
      : db_(std::move(db)), table_(std::move(table)), schema_(std::move(schema)) {}

  const std::shared_ptr<const Schema>& schema() const override { return schema_; }
  std::string Version() const override { return std::string(); }

  Status Read(const std::function<Status(const Batch&)>& each) override {
    std::string sql = "SELECT ";
    for (size_t i = 0; i < schema_->fields.size(); ++i) {
      sql += (i ? ", " : "") + Q(schema_->fields[i].name);
    }
    sql += " FROM " + MainTable(table_);
    FERRY_ASSIGN_OR_RETURN(Statement st, db_->Prepare(sql));
    Batch batch(schema_);
    for (;;) {
      auto row = st.Step();
      if (!row.ok()) return row.status().WithContext("reading table " + Q(table_));
      if (!*row) break;
      for (size_t c = 0; c < schema_->fields.size(); ++c) {
        Status s = AppendStored(st.raw(), static_cast<int>(c), &batch.column(c));
        if (!s.ok()) {
          const Field& f = schema_->fields[c];
          return Status::Corruption("table " + Q(table_) + " column " + Q(f.name) + " holds " +
                                    Shown(st.raw(), static_cast<int>(c)) +
                                    ", which is not a valid " + f.type.ToIceberg() +
                                    " as ferry stores it" +
                                    (s.message().empty() ? std::string() : ": " + s.message()));
        }
      }
      if (batch.num_rows() >= kReadBatchRows) {
        FERRY_RETURN_IF_ERROR(each(batch));
        batch.Clear();
      }
    }
    if (batch.num_rows() > 0) FERRY_RETURN_IF_ERROR(each(batch));
    return Status::OK();
  }

 private:
  std::unique_ptr<Database> db_;
  std::string table_;
  std::shared_ptr<const Schema> schema_;
};

// ---- the stream ----

class SqliteStream final : public SinkStream {
 public:
  SqliteStream(std::string pipeline, std::string stream, std::unique_ptr<Database> db,
               std::shared_ptr<const Schema> schema, Json marker, std::string target_columns,
               std::string source_columns)
      : pipeline_(std::move(pipeline)),
        stream_(std::move(stream)),
        table_(MainTable(stream_)),
        db_(std::move(db)),
        schema_(std::move(schema)),
        marker_(std::move(marker)),
        target_columns_(std::move(target_columns)),
        source_columns_(std::move(source_columns)) {
    key_ = KeyPositions(*schema_);
  }

  const std::shared_ptr<const Schema>& schema() const override { return schema_; }
  Json Marker() const override { return marker_; }

  // Creates the run's load table (kept when the load resumes) and drops older runs' tables.
  Status StartLoad(const std::string& run) override {
    FERRY_RETURN_IF_ERROR(broken_);
    if (run.empty()) return Status::InvalidArgument("a load needs a run id");
    WriteTxn txn(db_.get());
    FERRY_RETURN_IF_ERROR(txn.Begin());
    FERRY_RETURN_IF_ERROR(DropLoads(&run));
    FERRY_ASSIGN_OR_RETURN(std::string table, LoadTable(run));
    return txn.Commit();
  }

  Status Write(const Batch& batch) override { return Stage(kRows, batch); }
  Status WriteUpserts(const Batch& batch) override {
    FERRY_RETURN_IF_ERROR(RequireKey("upserted"));
    return Stage(kUpserts, batch);
  }
  Status WriteDeleteKeys(const Batch& batch) override {
    FERRY_RETURN_IF_ERROR(RequireKey("deleted by key"));
    return Stage(kDeletes, batch);
  }
  uint64_t pending_rows() const override { return staged_[kRows] + staged_[kUpserts]; }
  // A marker alone is one row update.
  bool CheapMarkerCommits() const override { return true; }
  bool HasPending() const override {
    return staged_[kRows] + staged_[kUpserts] + staged_[kDeletes] > 0;
  }

  Result<CommitResult> Commit(const std::string& load, const Json& marker,
                              const std::map<std::string, std::string>& summary,
                              const MarkerCheck& already_landed) override {
    (void)summary;  // SQLite keeps no commit summaries
    FERRY_RETURN_IF_ERROR(broken_);
    FERRY_ASSIGN_OR_RETURN(std::string marker_text, DumpJson(marker, "the marker"));
    FaultPoint("sink.data_written");
    WriteTxn txn(db_.get());
    FERRY_RETURN_IF_ERROR(txn.Begin());
    FERRY_ASSIGN_OR_RETURN(Json current, CurrentMarker());
    if (already_landed && already_landed(current)) {
      txn.Rollback();
      DiscardPending();
      return CommitResult{true};
    }
    std::string dest = table_;
    if (!load.empty()) {
      FERRY_ASSIGN_OR_RETURN(dest, LoadTable(load));
    }
    FERRY_RETURN_IF_ERROR(Apply(dest));
    FERRY_RETURN_IF_ERROR(
        WriteState(*db_, pipeline_, stream_, marker_text, target_columns_, false));
    FaultPoint("sink.before_commit");
    FERRY_RETURN_IF_ERROR(txn.Commit());
    totals_.rows += staged_[kRows] + staged_[kUpserts];
    ClearStagingAfterCommit();
    FaultPoint("sink.after_commit");
    return CommitResult{};
  }

  Result<CommitResult> Publish(const std::string& load, const Json& marker,
                               const MarkerCheck& already_landed) override {
    FERRY_RETURN_IF_ERROR(broken_);
    if (load.empty()) return Status::InvalidArgument("Publish needs the load's run id");
    FERRY_ASSIGN_OR_RETURN(std::string marker_text, DumpJson(marker, "the marker"));
    WriteTxn txn(db_.get());
    FERRY_RETURN_IF_ERROR(txn.Begin());
    FERRY_ASSIGN_OR_RETURN(Json current, CurrentMarker());
    if (already_landed && already_landed(current)) {
      txn.Rollback();
      return CommitResult{true};
    }
    FERRY_ASSIGN_OR_RETURN(std::string load_table, LoadTable(load));
    FERRY_ASSIGN_OR_RETURN(auto extras, UserIndexesAndTriggers(*db_, stream_));
    FERRY_RETURN_IF_ERROR(db_->Exec("DROP TABLE IF EXISTS " + table_));
    FERRY_RETURN_IF_ERROR(db_->Exec("ALTER TABLE " + load_table + " RENAME TO " + Q(stream_)));
    CreateAgain(*db_, stream_, extras);
    // This run's load table is the target now; older runs' leftovers go.
    FERRY_RETURN_IF_ERROR(DropLoads(nullptr));
    FERRY_RETURN_IF_ERROR(WriteState(*db_, pipeline_, stream_, marker_text, source_columns_, true));
    FaultPoint("sink.before_publish");
    FERRY_RETURN_IF_ERROR(txn.Commit());
    target_columns_ = source_columns_;
    FaultPoint("sink.after_publish");
    return CommitResult{};
  }

  void DiscardPending() override {
    Status s = ClearStaging();
    if (!s.ok()) broken_ = s.WithContext("clearing the staged rows of table " + Q(stream_));
  }

  Totals totals() const override { return totals_; }

 private:
  enum Staged { kRows = 0, kUpserts = 1, kDeletes = 2 };
  static constexpr const char* kStageTables[3] = {"temp.ferry_rows", "temp.ferry_upserts",
                                                  "temp.ferry_deletes"};

  Status RequireKey(const char* what) const {
    if (!key_.empty()) return Status::OK();
    return Status::InvalidArgument(
        "table " + Q(stream_) + " has no primary key, so rows cannot be " + what +
        "; declare a key on the source table (NOT NULL columns) or set the stream's primary_key");
  }

  // Creates the staging tables (untyped columns: values stay as bound) and their inserts.
  Status EnsureStaging() {
    if (staging_ready_) return Status::OK();
    const size_t n = schema_->fields.size();
    for (int kind = 0; kind < 3; ++kind) {
      const size_t cols = kind == kDeletes ? key_.size() : n;
      if (cols == 0) continue;  // no key: nothing can be deleted by key
      std::string defs, params;
      for (size_t i = 0; i < cols; ++i) {
        defs += (i ? ", c" : "c") + std::to_string(i);
        params += (i ? ", ?" : "?") + std::to_string(i + 1);
      }
      FERRY_RETURN_IF_ERROR(db_->Exec(std::string("CREATE TEMP TABLE IF NOT EXISTS ") +
                                      (kStageTables[kind] + 5) + " (" + defs + ")"));
      FERRY_ASSIGN_OR_RETURN(Statement st,
                             db_->Prepare(std::string("INSERT INTO ") + kStageTables[kind] +
                                          " VALUES (" + params + ")"));
      insert_[kind].emplace(std::move(st));
    }
    staging_ready_ = true;
    return Status::OK();
  }

  // Stages the batch's rows (for kDeletes: its key columns) in one transaction of the temp
  // database, which takes no lock on the main database.
  Status Stage(Staged kind, const Batch& batch) {
    FERRY_RETURN_IF_ERROR(broken_);
    FERRY_RETURN_IF_ERROR(CheckBatchColumns(batch, *schema_, Q(stream_)));
    if (batch.num_rows() == 0) return Status::OK();
    FERRY_RETURN_IF_ERROR(EnsureStaging());
    std::vector<size_t> cols = key_;
    if (kind != kDeletes) {
      cols.clear();
      for (size_t i = 0; i < batch.num_columns(); ++i) cols.push_back(i);
    }
    Statement& st = *insert_[kind];
    std::vector<std::string> scratch(cols.size());
    FERRY_RETURN_IF_ERROR(db_->Exec("BEGIN"));
    Status s;
    for (size_t r = 0; r < batch.num_rows() && s.ok(); ++r) {
      for (size_t j = 0; j < cols.size() && s.ok(); ++j) {
        s = BindValue(st.raw(), static_cast<int>(j + 1), batch.column(cols[j]), r, &scratch[j]);
        if (!s.ok()) {
          s = s.WithContext("column " + Q(schema_->fields[cols[j]].name));
        }
      }
      if (s.ok()) s = st.Exec();
      (void)st.Reset();
    }
    if (s.ok()) s = db_->Exec("COMMIT");
    if (!s.ok()) {
      if (sqlite3_get_autocommit(db_->raw()) == 0) (void)db_->Exec("ROLLBACK");
      return s.WithContext("staging rows for table " + Q(stream_));
    }
    staged_[kind] += batch.num_rows();
    return Status::OK();
  }

  Status ClearStaging() {
    for (int kind = 0; kind < 3; ++kind) {
      if (staged_[kind] == 0) continue;
      FERRY_RETURN_IF_ERROR(db_->Exec(std::string("DELETE FROM ") + kStageTables[kind]));
      staged_[kind] = 0;
    }
    return Status::OK();
  }

  // After a commit, staged rows must not stay: they would be applied again by the next commit.
  void ClearStagingAfterCommit() {
    Status s = ClearStaging();
    if (!s.ok()) {
      broken_ = s.WithContext("clearing the committed rows of table " + Q(stream_) +
                              " from staging; open the stream again");
      FERRY_LOG(kError) << broken_.message();
    }
  }

  // Inside the write transaction: the marker the database holds now.
  Result<Json> CurrentMarker() {
    FERRY_ASSIGN_OR_RETURN(StateRow row, ReadState(*db_, pipeline_, stream_));
    return ParseMarker(row, stream_, pipeline_);
  }

  // Inside the write transaction: drops the load tables of this table's runs other than `keep`
  // (all when null) and forgets them.
  Status DropLoads(const std::string* keep) {
    FERRY_ASSIGN_OR_RETURN(Statement st,
                           db_->Prepare("SELECT run, table_name FROM main.ferry_loads WHERE "
                                        "pipeline = ?1 AND split = ?2"));
    FERRY_RETURN_IF_ERROR(BindText(st, 1, pipeline_));
    FERRY_RETURN_IF_ERROR(BindText(st, 2, stream_));
    std::vector<std::pair<std::string, std::string>> runs;
    for (;;) {
      FERRY_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      if (keep == nullptr || st.Text(0) != *keep) runs.emplace_back(st.Text(0), st.Text(1));
    }
    FERRY_ASSIGN_OR_RETURN(
        Statement del,
        db_->Prepare(
            "DELETE FROM main.ferry_loads WHERE pipeline = ?1 AND split = ?2 AND run = ?3"));
    for (const auto& [run, table] : runs) {
      // IF EXISTS: a published run's table has the target's name by now.
      FERRY_RETURN_IF_ERROR(db_->Exec("DROP TABLE IF EXISTS " + MainTable(table)));
      FERRY_RETURN_IF_ERROR(BindText(del, 1, pipeline_));
      FERRY_RETURN_IF_ERROR(BindText(del, 2, stream_));
      FERRY_RETURN_IF_ERROR(BindText(del, 3, run));
      FERRY_RETURN_IF_ERROR(del.Exec());
      FERRY_RETURN_IF_ERROR(del.Reset());
    }
    return Status::OK();
  }

  // Inside the write transaction: the load table of run `run`, created by its first commit.
  Result<std::string> LoadTable(const std::string& run) {
    const std::string name = LoadTableName(pipeline_, stream_, run);
    FERRY_ASSIGN_OR_RETURN(Statement st,
                           db_->Prepare("SELECT table_name, columns FROM main.ferry_loads WHERE "
                                        "pipeline = ?1 AND split = ?2 AND run = ?3"));
    FERRY_RETURN_IF_ERROR(BindText(st, 1, pipeline_));
    FERRY_RETURN_IF_ERROR(BindText(st, 2, stream_));
    FERRY_RETURN_IF_ERROR(BindText(st, 3, run));
    FERRY_ASSIGN_OR_RETURN(bool found, st.Step());
    if (found) {
      const std::string table(st.Text(0));
      const std::string columns(st.Text(1));
      FERRY_ASSIGN_OR_RETURN(bool exists, TableExists(*db_, table));
      if (!exists) {
        return Status::Corruption("load table " + Q(table) + " of table " + Q(stream_) + " (run " +
                                  run +
                                  ") is missing although chunks were committed to it; start the "
                                  "full refresh of the stream again");
      }
      if (columns != source_columns_) {
        return Status::InvalidArgument(
            "the load of table " + Q(stream_) + " (run " + run +
            ") was started with other source columns than the stream has now; start the full "
            "refresh of the stream again");
      }
      return MainTable(table);
    }
    FERRY_RETURN_IF_ERROR(db_->Exec("DROP TABLE IF EXISTS " + MainTable(name)));
    FERRY_RETURN_IF_ERROR(db_->Exec(CreateTableSql(name, *schema_)));
    FERRY_ASSIGN_OR_RETURN(
        Statement ins,
        db_->Prepare("INSERT INTO main.ferry_loads (pipeline, split, run, table_name, columns, "
                     "created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"));
    FERRY_RETURN_IF_ERROR(BindText(ins, 1, pipeline_));
    FERRY_RETURN_IF_ERROR(BindText(ins, 2, stream_));
    FERRY_RETURN_IF_ERROR(BindText(ins, 3, run));
    FERRY_RETURN_IF_ERROR(BindText(ins, 4, name));
    FERRY_RETURN_IF_ERROR(BindText(ins, 5, source_columns_));
    FERRY_RETURN_IF_ERROR(BindText(ins, 6, NowText()));
    FERRY_RETURN_IF_ERROR(ins.Exec());
    return MainTable(name);
  }

  // Inside the write transaction: applies the staged deletes, upserts and rows to `dest`.
  Status Apply(const std::string& dest) {
    std::string cols, stage_cols, keys, key_stage_cols, updates;
    for (size_t i = 0; i < schema_->fields.size(); ++i) {
      const std::string name = Q(schema_->fields[i].name);
      cols += (i ? ", " : "") + name;
      stage_cols += (i ? ", c" : "c") + std::to_string(i);
      if (!IsKey(*schema_, schema_->fields[i].id)) {
        updates += (updates.empty() ? "" : ", ") + name + " = excluded." + name;
      }
    }
    for (size_t k = 0; k < key_.size(); ++k) {
      keys += (k ? ", " : "") + Q(schema_->fields[key_[k]].name);
      key_stage_cols += (k ? ", c" : "c") + std::to_string(k);
    }
    Status s;
    if (staged_[kDeletes] > 0) {
      s = db_->Exec("DELETE FROM " + dest + " WHERE (" + keys + ") IN (SELECT " + key_stage_cols +
                    " FROM temp.ferry_deletes)");
    }
    if (s.ok() && staged_[kUpserts] > 0) {
      s = db_->Exec("INSERT INTO " + dest + " (" + cols + ") SELECT " + stage_cols +
                    " FROM temp.ferry_upserts WHERE true ORDER BY rowid ON CONFLICT (" + keys +
                    ") DO " + (updates.empty() ? "NOTHING" : "UPDATE SET " + updates));
    }
    if (s.ok() && staged_[kRows] > 0) {
      s = db_->Exec("INSERT INTO " + dest + " (" + cols + ") SELECT " + stage_cols +
                    " FROM temp.ferry_rows ORDER BY rowid");
    }
    return ConstraintError(s, stream_, *schema_);
  }

  const std::string pipeline_;
  const std::string stream_;
  const std::string table_;  // main."stream"
  std::unique_ptr<Database> db_;
  std::shared_ptr<const Schema> schema_;
  Json marker_;
  std::string target_columns_;  // the live table's columns record
  std::string source_columns_;  // the stream's (load tables, Publish)
  std::vector<size_t> key_;     // key columns' positions in schema_
  bool staging_ready_ = false;
  std::optional<Statement> insert_[3];
  uint64_t staged_[3] = {0, 0, 0};
  Status broken_;
  Totals totals_;
};

// ---- schema evolution ----

std::string FixText(const std::string& table) {
  return "Run a full refresh of the stream to rebuild the table, or drop (or rename) table " +
         Q(table) + " so that ferry creates it again";
}

// Brings the live table `table` (recorded as `state.columns`) to take rows of `source`: the
// evolutions the header lists. Inside a write transaction. Returns the new columns record.
Result<std::string> Evolve(Database& db, const std::string& table, const std::string& pipeline,
                           const StateRow& state, const Json& marker, const Schema& source,
                           const std::string& source_columns) {
  if (state.columns == source_columns) return source_columns;
  FERRY_ASSIGN_OR_RETURN(Schema old, SchemaFromColumns(state.columns, table, pipeline));
  FERRY_ASSIGN_OR_RETURN(bool has_rows, TableHasRows(db, table));
  if (!has_rows && marker.is_null()) {
    // Nothing was ever committed: the table is made again for the new columns.
    FERRY_RETURN_IF_ERROR(RebuildTable(db, table, source, {}));
    FERRY_RETURN_IF_ERROR(WriteState(db, pipeline, table, state.marker, source_columns, true));
    return source_columns;
  }
  std::vector<std::string> old_key = KeyNames(old), new_key = KeyNames(source);
  if (std::set<std::string>(old_key.begin(), old_key.end()) !=
      std::set<std::string>(new_key.begin(), new_key.end())) {
    return Status::InvalidArgument(
        "the primary key of table " + Q(table) + " is " +
        (old_key.empty() ? std::string("none") : JoinNames(old_key)) + " and the source's is " +
        (new_key.empty() ? std::string("none") : JoinNames(new_key)) +
        "; ferry cannot change a table's key in place. " + FixText(table));
  }
  Schema out = old;
  std::vector<std::string> copy;
  for (const Field& f : old.fields) copy.push_back(f.name);
  std::vector<std::string> alters;
  bool relax = false;  // a NOT NULL column must become nullable: the table is rebuilt
  for (const Field& f : source.fields) {
    Field* o = nullptr;
    for (Field& x : out.fields) {
      if (x.name == f.name) o = &x;
    }
    if (o == nullptr) {
      for (const Field& x : out.fields) {
        if (Lower(x.name) == Lower(f.name)) {
          return Status::InvalidArgument(
              "source column " + Q(f.name) + " of table " + Q(table) + " differs from column " +
              Q(x.name) + " only in letter case, and SQLite's column names ignore case. " +
              FixText(table));
        }
      }
      Field added = f;
      added.id = static_cast<int32_t>(out.fields.size()) + 1;
      added.required = false;  // older rows have no value
      if (added.type.is_list()) added.type = DataType::List(f.type.list().type, false);
      alters.push_back("ALTER TABLE " + MainTable(table) + " ADD COLUMN " +
                       ColumnDefinition(added, false));
      out.fields.push_back(std::move(added));
      continue;
    }
    auto t = EvolvedType(o->type, f.type);
    if (!t) {
      return Status::InvalidArgument(
          "column " + Q(f.name) + " of table " + Q(table) + " is " + o->type.ToIceberg() +
          " in the table and " + f.type.ToIceberg() +
          " in the source; ferry only widens int to long, float to double and a decimal's "
          "precision (also as a list's element) in a table it updates. " +
          FixText(table));
    }
    o->type = *t;
    if (o->required && !f.required && !IsKey(out, o->id)) {
      o->required = false;
      relax = true;
    }
  }
  for (Field& o : out.fields) {
    if (o.required && !IsKey(out, o.id) && source.FindByName(o.name) == nullptr) {
      o.required = false;  // the source no longer has it: NULL in new rows
      relax = true;
    }
  }
  if (relax) {
    FERRY_RETURN_IF_ERROR(RebuildTable(db, table, out, copy));
  } else {
    for (const auto& sql : alters) FERRY_RETURN_IF_ERROR(db.Exec(sql));
  }
  FERRY_ASSIGN_OR_RETURN(std::string columns, ColumnsText(out));
  if (columns != state.columns) {
    FERRY_RETURN_IF_ERROR(WriteState(db, pipeline, table, state.marker, columns, true));
  }
  return columns;
}

// ---- the sink ----

bool ReservedTableName(const std::string& name) {
  const std::string l = Lower(name);
  return l == "ferry_state" || l == "ferry_loads" || l.rfind("ferry_load_", 0) == 0 ||
         l.rfind("ferry_rebuild_", 0) == 0 || l.rfind("sqlite_", 0) == 0;
}

Status CheckNames(const std::string& stream, const Schema& schema) {
  if (stream.empty()) return Status::InvalidArgument("a stream name is empty");
  if (ReservedTableName(stream)) {
    return Status::InvalidArgument(
        "stream " + Q(stream) +
        " cannot be written to SQLite: tables named ferry_state, ferry_loads, ferry_load_*, "
        "ferry_rebuild_* and sqlite_* are ferry's or SQLite's own");
  }
  if (schema.fields.empty()) {
    return Status::InvalidArgument("stream " + Q(stream) + " has no columns");
  }
  std::set<std::string> seen;
  for (const Field& f : schema.fields) {
    if (f.name.empty())
      return Status::InvalidArgument("stream " + Q(stream) + " has an unnamed column");
    if (!seen.insert(Lower(f.name)).second) {
      return Status::InvalidArgument("stream " + Q(stream) + " has two columns named " + Q(f.name) +
                                     " apart from letter case; SQLite's column names ignore case");
    }
  }
  for (int32_t id : schema.identifier_field_ids) {
    if (schema.FindById(id) == nullptr) {
      return Status::Internal("stream " + Q(stream) + " names a key column id " +
                              std::to_string(id) + " it does not have");
    }
  }
  return Status::OK();
}

class SqliteSink final : public Sink {
 public:
  SqliteSink(std::string path, std::string pipeline, std::unique_ptr<Database> db)
      : path_(std::move(path)), pipeline_(std::move(pipeline)), db_(std::move(db)) {}

  std::string Describe() const override { return "SQLite database " + path_; }
  std::string Guarantee() const override {
    return "exactly-once (rows and checkpoint in one SQLite transaction)";
  }
  std::string TableName(const std::string& stream) const override { return stream; }

  Result<std::unique_ptr<SinkStream>> OpenStream(const std::string& stream,
                                                 const Schema& source_schema,
                                                 bool replacing) override {
    FERRY_RETURN_IF_ERROR(CheckNames(stream, source_schema));
    FERRY_ASSIGN_OR_RETURN(std::string source_columns, ColumnsText(source_schema));
    FERRY_ASSIGN_OR_RETURN(auto db, Connect(path_, false));
    WriteTxn txn(db.get());
    FERRY_RETURN_IF_ERROR(txn.Begin());
    FERRY_ASSIGN_OR_RETURN(bool exists, TableExists(*db, stream));
    FERRY_ASSIGN_OR_RETURN(StateRow state, ReadState(*db, pipeline_, stream));
    Json marker = nullptr;
    std::string target_columns = source_columns;
    if (!exists) {
      // Created now, also for a stream that replaces its table: readers (verify) find the
      // table, empty, until the first load is published. No marker: nothing landed.
      FERRY_RETURN_IF_ERROR(db->Exec(CreateTableSql(stream, source_schema)));
      FERRY_RETURN_IF_ERROR(WriteState(*db, pipeline_, stream, "null", source_columns, true));
    } else if (!state.found) {
      return NotCreatedByUs(*db, stream);
    } else {
      FERRY_ASSIGN_OR_RETURN(marker, ParseMarker(state, stream, pipeline_));
      if (replacing) {
        target_columns = state.columns;  // the live table changes at Publish
      } else {
        FERRY_ASSIGN_OR_RETURN(target_columns, Evolve(*db, stream, pipeline_, state, marker,
                                                      source_schema, source_columns));
      }
    }
    FERRY_RETURN_IF_ERROR(txn.Commit());
    return std::unique_ptr<SinkStream>(new SqliteStream(
        pipeline_, stream, std::move(db), std::make_shared<const Schema>(source_schema),
        std::move(marker), std::move(target_columns), std::move(source_columns)));
  }

  Result<Json> ReadMarker(const std::string& stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    FERRY_ASSIGN_OR_RETURN(bool exists, TableExists(*db_, stream));
    if (!exists) return Json(nullptr);
    FERRY_ASSIGN_OR_RETURN(StateRow state, ReadState(*db_, pipeline_, stream));
    return ParseMarker(state, stream, pipeline_);
  }

  Result<std::unique_ptr<TableReader>> OpenReader(const std::string& stream) override {
    FERRY_ASSIGN_OR_RETURN(auto db, Connect(path_, false));
    FERRY_ASSIGN_OR_RETURN(bool exists, TableExists(*db, stream));
    if (!exists) return std::unique_ptr<TableReader>();
    FERRY_ASSIGN_OR_RETURN(StateRow state, ReadState(*db, pipeline_, stream));
    if (!state.found) return NotCreatedByUs(*db, stream);
    FERRY_ASSIGN_OR_RETURN(Schema schema, SchemaFromColumns(state.columns, stream, pipeline_));
    return std::unique_ptr<TableReader>(
        new SqliteReader(std::move(db), stream, std::make_shared<const Schema>(std::move(schema))));
  }

 private:
  Status NotCreatedByUs(Database& db, const std::string& stream) {
    std::string owners;
    auto st = db.Prepare("SELECT pipeline FROM main.ferry_state WHERE split = ?1 ORDER BY 1");
    if (st.ok() && BindText(*st, 1, stream).ok()) {
      while (true) {
        auto row = st->Step();
        if (!row.ok() || !*row) break;
        owners += (owners.empty() ? "'" : ", '") + std::string(st->Text(0)) + "'";
      }
    }
    return Status::InvalidArgument(
        "table " + Q(stream) + " exists in " + path_ +
        " but ferry did not create it for pipeline '" + pipeline_ +
        "' (ferry_state has no row for it" +
        (owners.empty() ? std::string() : "; it belongs to pipeline " + owners) +
        "), so ferry leaves it alone. Drop or rename the table (or write to another database "
        "file) and ferry creates it");
  }

  const std::string path_;
  const std::string pipeline_;
  std::mutex mu_;
  std::unique_ptr<Database> db_;  // guarded by mu_: ReadMarker
};

}  // namespace

Result<std::unique_ptr<Sink>> OpenSqliteSink(config::DestinationConfig& cfg,
                                             const std::string& pipeline) {
  config::Options& o = cfg.options;
  FERRY_ASSIGN_OR_RETURN(std::string path, o.TakePath("path"));
  FERRY_RETURN_IF_ERROR(o.CheckAllUsed({"path"}));
  if (pipeline.empty()) return Status::InvalidArgument("the pipeline has no name");
  FERRY_RETURN_IF_ERROR(MakeDirs(ParentDir(path)));
  auto db = Connect(path, true);
  if (!db.ok()) return db.status().WithContext("opening the SQLite destination");
  // WAL: readers (verify, users' queries) never block a commit, and commits do not block them.
  {
    FERRY_ASSIGN_OR_RETURN(Statement st, (*db)->Prepare("PRAGMA journal_mode=WAL"));
    FERRY_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row || Lower(st.Text(0)) != "wal") {
      FERRY_LOG(kWarn) << "SQLite database " << path
                       << " could not switch to WAL journal mode; readers may wait for commits";
    }
  }
  FERRY_RETURN_IF_ERROR((*db)->Exec(
      "CREATE TABLE IF NOT EXISTS main.ferry_state (pipeline TEXT NOT NULL, split TEXT NOT NULL, "
      "marker TEXT NOT NULL, columns TEXT NOT NULL, updated_at TEXT NOT NULL, "
      "PRIMARY KEY (pipeline, split));"
      "CREATE TABLE IF NOT EXISTS main.ferry_loads (pipeline TEXT NOT NULL, split TEXT NOT NULL, "
      "run TEXT NOT NULL, table_name TEXT NOT NULL, columns TEXT NOT NULL, "
      "created_at TEXT NOT NULL, PRIMARY KEY (pipeline, split, run))"));
  return std::unique_ptr<Sink>(new SqliteSink(path, pipeline, std::move(*db)));
}

}  // namespace ferry::sink
