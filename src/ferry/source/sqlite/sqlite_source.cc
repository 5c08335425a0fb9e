#include "ferry/source/sqlite/sqlite_source.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>

#include "ferry/base/fault.h"
#include "ferry/base/fs.h"
#include "ferry/base/log.h"
#include "ferry/clients/sqlite/sqlite.h"
#include "ferry/source/sqlite/convert.h"
#include "ferry/types/value_parse.h"

namespace ferry::source {
namespace {

using ferry::sqlite::Database;
using ferry::sqlite::QuoteIdentifier;
using ferry::sqlite::Statement;
using sqlite_src::AppendValue;
using sqlite_src::MapDeclaredType;

// The instants whose text form has a four-digit year, so that their text order is their order.
const int64_t kInstantMin = DaysFromCivil(0, 1, 1) * 86400000000LL;
const int64_t kInstantEnd = DaysFromCivil(10000, 1, 1) * 86400000000LL;

// ferry_instant(text): a timestamp's text as "YYYY-MM-DD HH:MM:SS.ffffff" in UTC (the zone offset
// applied), so that text order is time order: "2024-01-01T10:00:00+02:00" (08:00Z) sorts before
// "2024-01-01 09:00:00Z" as it should, and "T" and " " separators compare alike. The same parser
// as the column's values; text it cannot read (or a value that is not text) fails the statement
// with the value named, rather than being left out of every window. Registered on the source's
// connection for incremental cursors of timestamp columns.
void InstantFunction(sqlite3_context* ctx, int, sqlite3_value** argv) {
  const int type = sqlite3_value_type(argv[0]);
  if (type == SQLITE_NULL) {
    sqlite3_result_null(ctx);
    return;
  }
  std::string why;
  if (type == SQLITE_TEXT) {
    std::string_view text(reinterpret_cast<const char*>(sqlite3_value_text(argv[0])),
                          static_cast<size_t>(sqlite3_value_bytes(argv[0])));
    const bool zone = sqlite3_user_data(ctx) != nullptr;
    auto v = ParseTimestamp(text, zone);
    if (v.ok() && *v >= kInstantMin && *v < kInstantEnd) {
      const std::string out = FormatTimestamp(*v);
      sqlite3_result_text(ctx, out.data(), static_cast<int>(out.size()), SQLITE_TRANSIENT);
      return;
    }
    why = "cursor value '" + std::string(text.substr(0, 100)) + "' is not a timestamp ferry can " +
          "order (" +
          (v.ok() ? std::string("outside the years 0000 to 9999") : v.status().message()) +
          "); correct it, or set it NULL, in the source";
  } else {
    why =
        "cursor column holds a number where ISO-8601 text is expected; store the time as text "
        "(YYYY-MM-DD HH:MM:SS), or declare the column INTEGER if it holds epoch numbers";
  }
  sqlite3_result_error(ctx, why.data(), static_cast<int>(why.size()));
}

// How a table is split: by a key column (rowid or an integer primary key), by ranges of a WITHOUT
// ROWID table's primary key of other types or several columns, or not at all.
struct ChunkKey {
  std::string expr;  // quoted column or rowid alias; empty when the table is read whole
  // A WITHOUT ROWID table's own primary key (expr empty): chunks are ranges of its row value, in
  // SQLite's order (types, then each column's collation), with ChunkPlan::key the names' JSON.
  std::vector<std::string> columns;
  std::string Name() const { return nlohmann::json(columns).dump(); }
  // "k1", "k2": the key's columns, quoted (a select list, an ORDER BY).
  std::string List() const {
    std::string out;
    for (size_t i = 0; i < columns.size(); ++i)
      out += (i ? ", " : "") + QuoteIdentifier(columns[i]);
    return out;
  }
  std::string RowValue() const { return "(" + List() + ")"; }
  // "(?<first>, ?<first+1>, ...)": one parameter per key column.
  std::string Parameters(int first) const {
    std::string out = "(";
    for (size_t i = 0; i < columns.size(); ++i) {
      out += (i ? ", ?" : "?") + std::to_string(first + static_cast<int>(i));
    }
    return out + ")";
  }
};

// A key value as a chunk boundary holds it (Chunk::lo_key, hi_key): its storage class and its
// value in text, so that the boundary compares as the value did ("i42", "r0.5", "tabc", "b0aff").
std::string EncodeKeyValue(const Statement& st, int i) {
  switch (st.ColumnType(i)) {
    case SQLITE_INTEGER:
      return "i" + std::to_string(st.Int64(i));
    case SQLITE_FLOAT: {
      char text[40];
      std::snprintf(text, sizeof text, "r%.17g", st.Double(i));
      return text;
    }
    case SQLITE_BLOB: {
      static constexpr char kHex[] = "0123456789abcdef";
      std::string out = "b";
      for (unsigned char c : st.Blob(i)) {
        out += kHex[c >> 4];
        out += kHex[c & 15];
      }
      return out;
    }
    default:
      return "t" + std::string(st.Text(i));
  }
}

// Binds a boundary's values (EncodeKeyValue) to parameters first, first+1, ...
Status BindKeyValues(Statement& st, int first, const nlohmann::json& bound, size_t columns,
                     const std::string& table) {
  auto bad = [&] {
    return Status::Corruption("chunk bound " + bound.dump() + " of table " + table +
                              " is not one value per key column (state file or marker damaged?)");
  };
  if (!bound.is_array() || bound.size() != columns) return bad();
  for (size_t i = 0; i < columns; ++i) {
    if (!bound[i].is_string() || bound[i].get_ref<const std::string&>().empty()) return bad();
    const std::string& v = bound[i].get_ref<const std::string&>();
    const std::string_view rest = std::string_view(v).substr(1);
    const int at = first + static_cast<int>(i);
    switch (v[0]) {
      case 'i': {
        int64_t n = 0;
        auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), n);
        if (ec != std::errc() || end != rest.data() + rest.size()) return bad();
        st.Bind(at, n);
        break;
      }
      case 'r': {
        char* end = nullptr;
        const std::string text(rest);
        const double d = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size()) return bad();
        st.BindDouble(at, d);
        break;
      }
      case 'b': {
        if (rest.size() % 2 != 0) return bad();
        std::string bytes;
        for (size_t k = 0; k < rest.size(); k += 2) {
          int byte = 0;
          auto [end, ec] = std::from_chars(rest.data() + k, rest.data() + k + 2, byte, 16);
          if (ec != std::errc() || end != rest.data() + k + 2) return bad();
          bytes += static_cast<char>(byte);
        }
        st.BindBlob(at, bytes);
        break;
      }
      case 't':
        st.Bind(at, rest);
        break;
      default:
        return bad();
    }
  }
  return Status::OK();
}

class SqliteSource final : public Source {
 public:
  SqliteSource(std::unique_ptr<Database> db, std::string path)
      : db_(std::move(db)), path_(std::move(path)) {
    static int zone = 1;
    for (auto [name, data] : {std::pair<const char*, void*>{"ferry_instant_tz", &zone},
                              std::pair<const char*, void*>{"ferry_instant", nullptr}}) {
      sqlite3_create_function(db_->raw(), name, 1,
                              SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_DIRECTONLY, data,
                              InstantFunction, nullptr, nullptr);
    }
  }

  Result<std::vector<StreamInfo>> Discover() override {
    FERRY_ASSIGN_OR_RETURN(
        auto st,
        db_->Prepare(
            "SELECT name, wr FROM pragma_table_list WHERE schema = 'main' AND type = 'table'"
            " AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
            " AND name NOT LIKE '\\_ferry\\_cdc\\_%' ESCAPE '\\' ORDER BY name"));
    std::vector<std::pair<std::string, bool>> tables;
    for (;;) {
      FERRY_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      tables.emplace_back(std::string(st.Text(0)), st.Int64(1) != 0);
    }
    std::vector<StreamInfo> out;
    for (const auto& [name, without_rowid] : tables) {
      FERRY_ASSIGN_OR_RETURN(StreamInfo info, Describe(name, without_rowid));
      out.push_back(std::move(info));
    }
    return out;
  }

  Status BeginSnapshot() override {
    FERRY_ASSIGN_OR_RETURN(auto jm, db_->Prepare("PRAGMA journal_mode"));
    FERRY_ASSIGN_OR_RETURN(bool row, jm.Step());
    if (row && jm.Text(0) != "wal") {
      FERRY_LOG(kInfo) << "SQLite database " << path_ << " is in journal mode '" << jm.Text(0)
                       << "': writers wait while the sync reads (WAL mode lets them go on)";
    }
    FERRY_RETURN_IF_ERROR(db_->Exec("BEGIN"));
    // A read transaction starts at its first read: take it now, for every stream at once.
    return db_->Exec("SELECT count(*) FROM sqlite_schema");
  }

  Status EndSnapshot() override { return db_->Exec("COMMIT"); }

  Result<ChunkPlan> PlanChunks(const StreamInfo& stream, int64_t chunk_rows) override {
    ChunkKey key = KeyFor(stream);
    if (key.expr.empty() && !key.columns.empty()) return RowValuePlan(stream, key, chunk_rows);
    if (key.expr.empty()) return ChunkPlan{};
    FERRY_ASSIGN_OR_RETURN(auto range, KeyRange(stream.name, key));
    if (!range) return ChunkPlan{};
    auto [lo, hi] = *range;
    const std::string table = "main." + QuoteIdentifier(stream.name);
    // Dense keys keep the grid, which needs the row count (a pass over the table's pages). When
    // even the most rows the file could hold would not fill the grid (keys far sparser than any
    // table of this file's size), the count is skipped: the walk below counts the rows itself.
    std::optional<int64_t> counted;
    FERRY_ASSIGN_OR_RETURN(const int64_t most, MostRows());
    if (GridPlan(lo, hi, most, chunk_rows)) {
      FERRY_ASSIGN_OR_RETURN(counted, CountRows(table));
      if (auto grid = GridPlan(lo, hi, *counted, chunk_rows)) return *grid;
    }
    // Sparse or skewed keys: a boundary every chunk_rows keys, walking the key's b-tree (the
    // keys only, in order: one pass over them for the whole plan).
    FERRY_ASSIGN_OR_RETURN(
        auto next, db_->Prepare("SELECT " + key.expr + " FROM " + table + " WHERE " + key.expr +
                                " > ?1 ORDER BY " + key.expr + " LIMIT 1 OFFSET ?2"));
    ChunkPlan plan;
    int64_t from = lo;
    int64_t skip = chunk_rows - 1;  // the first chunk also holds `lo`
    for (;;) {
      FERRY_RETURN_IF_ERROR(next.Reset());
      next.Bind(1, from);
      next.Bind(2, skip);
      FERRY_ASSIGN_OR_RETURN(bool more, next.Step());
      if (!more) break;
      from = next.Int64(0);
      plan.bounds.push_back(from);
      skip = chunk_rows - 1;
    }
    plan.count = static_cast<int64_t>(plan.bounds.size()) + 1;
    if (!plan.bounds.empty()) plan.first = plan.bounds.front();
    if (counted) {
      plan.rows = *counted;
    } else {
      // Every chunk but the last holds chunk_rows keys; the last one's are counted.
      FERRY_ASSIGN_OR_RETURN(auto tail, db_->Prepare("SELECT count(*) FROM " + table + " WHERE " +
                                                     key.expr + " >= ?1"));
      tail.Bind(1, from);
      FERRY_ASSIGN_OR_RETURN(const int64_t last, FirstInt64(tail));
      plan.rows = static_cast<int64_t>(plan.bounds.size()) * chunk_rows + last;
    }
    return plan;
  }

  // The rows of `table` (quoted): count(*) walks the b-tree's pages without decoding a row.
  Result<int64_t> CountRows(const std::string& table) {
    FERRY_ASSIGN_OR_RETURN(auto count, db_->Prepare("SELECT count(*) FROM " + table));
    return FirstInt64(count);
  }

  // The first column of `st`'s first row (stepped here), 0 when it has none.
  static Result<int64_t> FirstInt64(Statement& st) {
    FERRY_ASSIGN_OR_RETURN(bool row, st.Step());
    return row ? st.Int64(0) : 0;
  }

  // The most rows any table of the database could hold, without reading it: a row takes at
  // least 4 bytes of a b-tree page (SQLite's smallest cell), so no more than page_size / 4 rows
  // fit a page, and no table has more pages than the file.
  Result<int64_t> MostRows() {
    FERRY_ASSIGN_OR_RETURN(auto pages, db_->Prepare("PRAGMA main.page_count"));
    FERRY_ASSIGN_OR_RETURN(auto size, db_->Prepare("PRAGMA main.page_size"));
    FERRY_ASSIGN_OR_RETURN(const int64_t page_count, FirstInt64(pages));
    FERRY_ASSIGN_OR_RETURN(const int64_t page_size, FirstInt64(size));
    return page_count * (page_size / 4);
  }

  // A WITHOUT ROWID table's key ranges: a boundary every chunk_rows keys, walking the primary
  // key's b-tree in order (the key's columns only: one pass over them for the whole plan).
  Result<ChunkPlan> RowValuePlan(const StreamInfo& stream, const ChunkKey& key,
                                 int64_t chunk_rows) {
    const std::string table = "main." + QuoteIdentifier(stream.name);
    chunk_rows = std::max<int64_t>(chunk_rows, 1);
    ChunkPlan plan;
    plan.key = key.Name();
    FERRY_ASSIGN_OR_RETURN(plan.rows, CountRows(table));
    if (plan.rows <= chunk_rows) return plan;
    const int k = static_cast<int>(key.columns.size());
    const std::string select = "SELECT " + key.List() + " FROM " + table;
    FERRY_ASSIGN_OR_RETURN(auto first,
                           db_->Prepare(select + " ORDER BY " + key.List() + " LIMIT 1 OFFSET ?1"));
    FERRY_ASSIGN_OR_RETURN(auto next, db_->Prepare(select + " WHERE " + key.RowValue() + " > " +
                                                   key.Parameters(1) + " ORDER BY " + key.List() +
                                                   " LIMIT 1 OFFSET ?" + std::to_string(k + 1)));
    first.Bind(1, chunk_rows);  // the first chunk holds the first chunk_rows keys
    Statement* at = &first;
    for (;;) {
      FERRY_ASSIGN_OR_RETURN(bool more, at->Step());
      if (!more) break;
      nlohmann::json bound = nlohmann::json::array();
      for (int i = 0; i < k; ++i) bound.push_back(EncodeKeyValue(*at, i));
      FERRY_RETURN_IF_ERROR(next.Reset());
      FERRY_RETURN_IF_ERROR(BindKeyValues(next, 1, bound, key.columns.size(), stream.name));
      next.Bind(k + 1, chunk_rows - 1);
      plan.key_bounds.push_back(std::move(bound));
      at = &next;
    }
    plan.count = static_cast<int64_t>(plan.key_bounds.size()) + 1;
    return plan;
  }

  Status ReadChunk(const StreamInfo& stream, const Chunk& chunk,
                   std::shared_ptr<const Schema> schema, size_t batch_rows,
                   const std::function<bool(Batch&)>& emit) override {
    if (const std::string p = stream.Problem(); !p.empty()) return Status::NotSupported(p);
    ChunkKey key = KeyFor(stream);
    if (key.expr.empty() && !chunk.key.empty() && chunk.key != key.Name()) {
      return Status::InvalidArgument(
          "the load of " + stream.name + " was planned on key columns " + chunk.key +
          ", which are no longer the table's primary key; move the stream's entry out of the "
          "state file (or the state file away) and sync again");
    }
    std::string sql = "SELECT ";
    for (size_t i = 0; i < stream.columns.size(); ++i) {
      sql += (i ? ", " : "") + QuoteIdentifier(stream.columns[i].name);
    }
    sql += ", " + (key.expr.empty() ? std::string("NULL") : key.expr);
    sql += " FROM main." + QuoteIdentifier(stream.name);
    if (!key.expr.empty()) {
      std::vector<std::string> where;
      if (chunk.lo) where.push_back(key.expr + " >= ?1");
      if (chunk.hi) where.push_back(key.expr + " < ?2");
      for (size_t i = 0; i < where.size(); ++i) sql += (i ? " AND " : " WHERE ") + where[i];
      sql += " ORDER BY " + key.expr;
    }
    const int k = static_cast<int>(key.columns.size());
    if (key.expr.empty() && !key.columns.empty()) {
      std::vector<std::string> where;
      if (!chunk.lo_key.is_null()) where.push_back(key.RowValue() + " >= " + key.Parameters(1));
      if (!chunk.hi_key.is_null()) where.push_back(key.RowValue() + " < " + key.Parameters(k + 1));
      for (size_t i = 0; i < where.size(); ++i) sql += (i ? " AND " : " WHERE ") + where[i];
      sql += " ORDER BY " + key.List();
    }
    FERRY_ASSIGN_OR_RETURN(auto st, db_->Prepare(sql));
    if (chunk.lo) st.Bind(1, *chunk.lo);
    if (chunk.hi) st.Bind(2, *chunk.hi);
    if (!chunk.lo_key.is_null()) {
      FERRY_RETURN_IF_ERROR(BindKeyValues(st, 1, chunk.lo_key, key.columns.size(), stream.name));
    }
    if (!chunk.hi_key.is_null()) {
      FERRY_RETURN_IF_ERROR(
          BindKeyValues(st, k + 1, chunk.hi_key, key.columns.size(), stream.name));
    }
    return EmitRows(stream, st, std::move(schema), batch_rows, !key.expr.empty(), emit);
  }

  Result<nlohmann::json> MaxCursor(const StreamInfo& stream, const std::string& cursor,
                                   const nlohmann::json& above) override {
    FERRY_RETURN_IF_ERROR(CheckCursor(stream, cursor));
    auto max = MaxOf(stream, cursor, above);
    if (!max.ok()) return max.status().WithContext("table " + stream.name + ", cursor " + cursor);
    return max;
  }

  Result<nlohmann::json> MaxOf(const StreamInfo& stream, const std::string& cursor,
                               const nlohmann::json& above) {
    // The same comparison as the window's reads.
    const std::string c = CursorExpr(stream, cursor, QuoteIdentifier(cursor));
    std::string sql = "SELECT max(" + c + ") FROM main." + QuoteIdentifier(stream.name);
    if (!above.is_null()) sql += " WHERE " + c + " > " + CursorExpr(stream, cursor, "?1");
    FERRY_ASSIGN_OR_RETURN(auto st, db_->Prepare(sql));
    if (!above.is_null()) BindCursor(st, 1, above);
    FERRY_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row || st.IsNull(0)) return nlohmann::json(nullptr);
    switch (st.ColumnType(0)) {
      case SQLITE_INTEGER:
        return nlohmann::json(st.Int64(0));
      case SQLITE_FLOAT:
        return nlohmann::json(st.Double(0));
      case SQLITE_TEXT:
        return nlohmann::json(std::string(st.Text(0)));
      default:
        return Status::InvalidArgument("table " + stream.name + ": cursor column " + cursor +
                                       " holds blobs; pick a column of numbers, dates or text");
    }
  }

  Status ReadCursorRange(const StreamInfo& stream, const std::string& cursor,
                         const CursorRange& range, std::shared_ptr<const Schema> schema,
                         size_t batch_rows, const std::function<bool(Batch&)>& emit) override {
    FERRY_RETURN_IF_ERROR(CheckCursor(stream, cursor));
    const std::string c = CursorExpr(stream, cursor, QuoteIdentifier(cursor));
    std::string sql = "SELECT ";
    for (size_t i = 0; i < stream.columns.size(); ++i) {
      sql += (i ? ", " : "") + QuoteIdentifier(stream.columns[i].name);
    }
    // A NULL cursor satisfies no comparison: `IS NOT NULL` keeps an unbounded range the same.
    sql += ", NULL FROM main." + QuoteIdentifier(stream.name) + " WHERE " + c + " IS NOT NULL";
    if (!range.lower.is_null()) {
      sql += " AND " + c + (range.lower_closed ? " >= " : " > ") + CursorExpr(stream, cursor, "?1");
    }
    if (!range.upper.is_null()) {
      sql += " AND " + c + (range.upper_closed ? " <= " : " < ") + CursorExpr(stream, cursor, "?2");
    }
    sql += " ORDER BY " + c;
    FERRY_ASSIGN_OR_RETURN(auto st, db_->Prepare(sql));
    if (!range.lower.is_null()) BindCursor(st, 1, range.lower);
    if (!range.upper.is_null()) BindCursor(st, 2, range.upper);
    return EmitRows(stream, st, std::move(schema), batch_rows, /*has_key=*/false, emit);
  }

  // How a cursor column is compared: timestamps as instants (ferry_instant), every other column
  // as SQLite compares it (its affinity and collation). `operand` is the column or a parameter.
  static std::string CursorExpr(const StreamInfo& stream, const std::string& cursor,
                                const std::string& operand) {
    for (const auto& c : stream.columns) {
      if (c.name != cursor) continue;
      if (c.type.kind() == TypeKind::kTimestampTz) return "ferry_instant_tz(" + operand + ")";
      if (c.type.kind() == TypeKind::kTimestamp) return "ferry_instant(" + operand + ")";
    }
    return operand;
  }

  // A cursor value from MaxCursor (kept in the state file and the marker) as a parameter.
  static void BindCursor(ferry::sqlite::Statement& st, int idx, const nlohmann::json& v) {
    if (v.is_number_integer()) {
      st.Bind(idx, v.get<int64_t>());
    } else if (v.is_number()) {
      sqlite3_bind_double(st.raw(), idx, v.get<double>());
    } else {
      st.Bind(idx, std::string_view(v.get_ref<const std::string&>()));
    }
  }

  // ---- CDC through change tables -------------------------------------------------------------
  // For a table T ferry installs "_ferry_cdc_T" (an AUTOINCREMENT sequence, the operation, and a
  // copy of T's columns without types, so values keep exactly what T stored) and three triggers
  // that record every insert, update and delete in it. An update that changes the key records a
  // delete of the old key first. Rows a REPLACE displaces through other unique indexes are
  // recorded by two more (DisplaceTriggers).

  Status PrepareChangeCapture(const StreamInfo& stream) override {
    if (stream.primary_key.empty()) {
      return Status::InvalidArgument("table " + stream.name +
                                     " has no primary key; cdc applies changes by key: declare "
                                     "one (or set the stream's primary_key), or use full_refresh");
    }
    for (const auto& c : stream.columns) {
      if (c.name.rfind("_ferry_", 0) == 0) {
        return Status::InvalidArgument(
            "table " + stream.name + " has a column named " + c.name +
            "; names starting with _ferry_ are reserved for change capture");
      }
    }
    FERRY_ASSIGN_OR_RETURN(auto rw, OpenWriter());
    const std::string ct = QuoteIdentifier(ChangeTable(stream));
    const std::string t = QuoteIdentifier(stream.name);
    std::string cols, new_vals, old_vals, key_changed;
    for (size_t i = 0; i < stream.columns.size(); ++i) {
      std::string q = QuoteIdentifier(stream.columns[i].name);
      cols += ", " + q;
      new_vals += ", NEW." + q;
      old_vals += ", OLD." + q;
    }
    for (const auto& k : stream.primary_key) {
      std::string q = QuoteIdentifier(k);
      key_changed +=
          std::string(key_changed.empty() ? "" : " OR ") + "OLD." + q + " IS NOT NEW." + q;
    }
    // Operations: 1 insert, 4 update (the new row; 1 in capture installed before updates were
    // told apart), 2 delete (the row as it was: deletes: soft keeps its last values), 3 maybe
    // displaced (DisplaceTriggers).
    const std::string trig = "_ferry_cdc_" + stream.name;
    const std::string record = " BEGIN INSERT INTO " + ct + " (_ferry_op" + cols + ") ";
    std::string ddl = "BEGIN IMMEDIATE;CREATE TABLE IF NOT EXISTS main." + ct +
                      " (_ferry_seq INTEGER PRIMARY KEY AUTOINCREMENT, _ferry_op INTEGER NOT NULL" +
                      cols + ");";
    FERRY_ASSIGN_OR_RETURN(std::string triggers, TriggerDdl(*rw, trig + "_insert",
                                                            "AFTER INSERT ON " + t + record +
                                                                "VALUES (1" + new_vals + "); END"));
    ddl += triggers;
    FERRY_ASSIGN_OR_RETURN(
        triggers,
        TriggerDdl(*rw, trig + "_update",
                   "AFTER UPDATE ON " + t + record + "SELECT 2" + old_vals + " WHERE " +
                       key_changed + ";" + record.substr(7) + "VALUES (4" + new_vals + "); END"));
    ddl += triggers;
    FERRY_ASSIGN_OR_RETURN(
        triggers, TriggerDdl(*rw, trig + "_delete",
                             "AFTER DELETE ON " + t + record + "VALUES (2" + old_vals + "); END"));
    ddl += triggers;
    FERRY_ASSIGN_OR_RETURN(std::string displace, DisplaceTriggers(*rw, stream));
    ddl += displace + "COMMIT;";
    Status s = rw->Exec(ddl);
    if (!s.ok()) {
      (void)rw->Exec("ROLLBACK");
      return Status(s.code(), "installing change capture on table " + stream.name + ": " +
                                  s.message() + " (cdc needs write access to the database file)");
    }
    // A change table made for an older shape of the table would record the wrong columns.
    FERRY_ASSIGN_OR_RETURN(
        auto info,
        rw->Prepare("SELECT name FROM pragma_table_info(?1) WHERE cid >= 2 ORDER BY cid"));
    info.Bind(1, ChangeTable(stream));
    std::vector<std::string> recorded;
    for (;;) {
      FERRY_ASSIGN_OR_RETURN(bool row, info.Step());
      if (!row) break;
      recorded.emplace_back(info.Text(0));
    }
    std::vector<std::string> now;
    for (const auto& c : stream.columns) now.push_back(c.name);
    if (recorded != now) {
      return Status::InvalidArgument("table " + stream.name +
                                     " changed its columns since change capture was installed; "
                                     "drop the table " +
                                     ChangeTable(stream) + " and the triggers named _ferry_cdc_" +
                                     stream.name +
                                     "_*, then run a full "
                                     "refresh of the stream (mode cdc does one first)");
    }
    return Status::OK();
  }

  // INSERT OR REPLACE (and UPDATE OR REPLACE, REPLACE INTO, ON CONFLICT REPLACE) deletes the rows
  // whose UNIQUE values the new row takes, without firing the DELETE trigger unless the writer's
  // connection has recursive_triggers on, which ferry does not control. So a BEFORE INSERT and a
  // BEFORE UPDATE trigger record, for each UNIQUE index other than the capture key, the keys of
  // the rows that hold the new row's values there, as "maybe displaced" (op 3): the statement may
  // still fail or IGNORE the row, so ReadChanges looks such a key up in the table (in the same
  // snapshot as the change log) and applies what it finds — the row as it is, or its delete. The
  // triggers follow the table's indexes: made again (in the same transaction) when they changed.
  // Returns the DDL to run; unique indexes on expressions cannot be matched and are logged.
  Result<std::string> DisplaceTriggers(Database& rw, const StreamInfo& stream) {
    std::vector<std::vector<std::string>> uniques;
    FERRY_ASSIGN_OR_RETURN(auto idx, rw.Prepare("SELECT name FROM pragma_index_list(?1, 'main') "
                                                "WHERE \"unique\" = 1 ORDER BY name"));
    idx.Bind(1, stream.name);
    std::vector<std::string> names;
    for (;;) {
      FERRY_ASSIGN_OR_RETURN(bool row, idx.Step());
      if (!row) break;
      names.emplace_back(idx.Text(0));
    }
    for (const auto& name : names) {
      FERRY_ASSIGN_OR_RETURN(auto cols, rw.Prepare("SELECT cid, name FROM pragma_index_xinfo(?1, "
                                                   "'main') WHERE key = 1 ORDER BY seqno"));
      cols.Bind(1, name);
      std::vector<std::string> u;
      bool expression = false;
      for (;;) {
        FERRY_ASSIGN_OR_RETURN(bool row, cols.Step());
        if (!row) break;
        if (cols.Int64(0) < 0) expression = true;
        if (!cols.IsNull(1)) u.emplace_back(cols.Text(1));
      }
      if (expression) {
        FERRY_LOG(kWarn) << "table " << stream.name << ": unique index " << name
                         << " is on an expression; a REPLACE that displaces a row through it is "
                            "not seen (docs/limits.md)";
        continue;
      }
      uniques.push_back(std::move(u));
    }
    // A rowid alias (INTEGER PRIMARY KEY) is unique without an index of its own.
    if (!without_rowid_[stream.name]) {
      FERRY_ASSIGN_OR_RETURN(auto pk, rw.Prepare("SELECT name, type FROM pragma_table_info(?1, "
                                                 "'main') WHERE pk > 0"));
      pk.Bind(1, stream.name);
      std::vector<std::pair<std::string, std::string>> declared;
      for (;;) {
        FERRY_ASSIGN_OR_RETURN(bool row, pk.Step());
        if (!row) break;
        declared.emplace_back(pk.Text(0), pk.Text(1));
      }
      if (declared.size() == 1) {
        std::string type = declared[0].second;
        std::transform(type.begin(), type.end(), type.begin(), ::toupper);
        if (type == "INTEGER") uniques.push_back({declared[0].first});
      }
    }
    std::vector<std::string> key = stream.primary_key;
    std::sort(key.begin(), key.end());
    const std::string t = QuoteIdentifier(stream.name);
    const std::string ct = QuoteIdentifier(ChangeTable(stream));
    std::string cols, same_key;
    for (const auto& c : stream.columns) cols += ", " + QuoteIdentifier(c.name);
    for (const auto& k : stream.primary_key) {
      const std::string q = QuoteIdentifier(k);
      same_key += std::string(same_key.empty() ? "" : " AND ") + q + " IS NEW." + q;
    }
    std::string body;
    for (auto& u : uniques) {
      std::vector<std::string> sorted = u;
      std::sort(sorted.begin(), sorted.end());
      if (sorted == key) continue;  // the capture key itself: its insert records the new row
      std::string match;
      for (const auto& c : u) {
        const std::string q = QuoteIdentifier(c);
        match += std::string(match.empty() ? "" : " AND ") + q + " = NEW." + q;
      }
      body += " INSERT INTO " + ct + " (_ferry_op" + cols + ") SELECT 3" + cols + " FROM main." +
              t + " WHERE " + match + " AND NOT (" + same_key + ");";
    }
    const std::string trig = "_ferry_cdc_" + stream.name;
    std::string ddl;
    for (const char* event : {"INSERT", "UPDATE"}) {
      std::string lower = event;
      std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
      FERRY_ASSIGN_OR_RETURN(std::string d,
                             TriggerDdl(rw, trig + "_displace_" + lower,
                                        body.empty() ? ""
                                                     : "BEFORE " + std::string(event) + " ON " + t +
                                                           " BEGIN" + body + " END"));
      ddl += d;
    }
    return ddl;
  }

  // The DDL that leaves trigger `name` as "CREATE TRIGGER <name> <definition>" (none when
  // `definition` is empty): nothing when it is so already, else the old one dropped and the new
  // one made (SQLite keeps a trigger's text as written, so an older definition is told apart).
  static Result<std::string> TriggerDdl(Database& rw, const std::string& name,
                                        const std::string& definition) {
    FERRY_ASSIGN_OR_RETURN(auto have, rw.Prepare("SELECT sql FROM main.sqlite_schema WHERE "
                                                 "type = 'trigger' AND name = ?1"));
    have.Bind(1, name);
    FERRY_ASSIGN_OR_RETURN(bool exists, have.Step());
    const std::string current = exists && !have.IsNull(0) ? std::string(have.Text(0)) : "";
    const std::string create =
        definition.empty() ? "" : "CREATE TRIGGER " + QuoteIdentifier(name) + " " + definition;
    if (current == create) return std::string();
    std::string ddl;
    if (exists) ddl += "DROP TRIGGER main." + QuoteIdentifier(name) + ";";
    if (!create.empty()) ddl += create + ";";
    return ddl;
  }

  Position::Kind position_kind() const override { return Position::Kind::kSequence; }

  Result<Position> ChangeLogEnd(const StreamInfo& stream) override {
    FERRY_ASSIGN_OR_RETURN(auto st,
                           db_->Prepare("SELECT seq FROM main.sqlite_sequence WHERE name = ?1"));
    st.Bind(1, ChangeTable(stream));
    auto row = st.Step();
    if (!row.ok()) {
      // No AUTOINCREMENT table has been used yet: sqlite_sequence may not exist.
      return Position();
    }
    return *row ? Position::Sequence(std::max<int64_t>(st.Int64(0), 0)) : Position();
  }

  Status ReadChanges(const StreamInfo& stream, Position from, Position to,
                     std::shared_ptr<const Schema> schema, size_t batch_rows,
                     const std::function<bool(Batch&, bool deletes)>& emit) override {
    std::string keys, join;
    for (const auto& k : stream.primary_key) {
      const std::string q = QuoteIdentifier(k);
      keys += (keys.empty() ? "" : ", ") + q;
      join += " AND t." + q + " = l." + q;
    }
    // A key whose last change is "maybe displaced" (op 3, see DisplaceTriggers) is looked up in
    // the table, read in the same snapshot: found, its row as it is; gone, its delete.
    const std::string found =
        "(l._ferry_op = 3 AND t." + QuoteIdentifier(stream.primary_key.front()) + " IS NOT NULL)";
    std::string cols;
    for (const auto& c : stream.columns) {
      const std::string q = QuoteIdentifier(c.name);
      cols += ", CASE WHEN " + found + " THEN t." + q + " ELSE l." + q + " END";
    }
    // The last change of each key in the window: earlier ones are superseded.
    std::string sql = "SELECT CASE WHEN l._ferry_op = 3 THEN CASE WHEN " + found +
                      " THEN 4 ELSE 2 END ELSE l._ferry_op END" + cols +
                      ", l._ferry_seq FROM (SELECT *, row_number() OVER (PARTITION BY " + keys +
                      " ORDER BY _ferry_seq DESC) AS _ferry_rn FROM main." +
                      QuoteIdentifier(ChangeTable(stream)) +
                      " WHERE _ferry_seq > ?1 AND _ferry_seq <= ?2) AS l LEFT JOIN main." +
                      QuoteIdentifier(stream.name) + " AS t ON l._ferry_op = 3" + join +
                      " WHERE l._ferry_rn = 1 ORDER BY l._ferry_seq";
    FERRY_ASSIGN_OR_RETURN(auto st, db_->Prepare(sql));
    st.Bind(1, from.sequence()).Bind(2, to.sequence());
    std::vector<bool> is_key;
    for (const auto& c : stream.columns) is_key.push_back(c.pk_position > 0);
    Batch upserts(schema), deletes(schema);
    const int ncols = static_cast<int>(stream.columns.size());
    int64_t n = 0;
    for (;;) {
      auto more = st.Step();
      if (!more.ok()) return more.status().WithContext("reading changes of " + stream.name);
      if (!*more) break;
      const int64_t op = st.Int64(0);
      const bool del = op == 2;
      const std::string* null_key = nullptr;
      for (int c = 0; c < ncols && !null_key; ++c) {
        if (is_key[static_cast<size_t>(c)] && st.IsNull(c + 1)) {
          null_key = &stream.columns[static_cast<size_t>(c)].name;
        }
      }
      if (null_key) {
        // A row whose key is NULL never landed (it was refused): its delete removes nothing.
        if (del) continue;
        return NullKey(stream, *null_key,
                       "change " + std::to_string(st.Int64(ncols + 1)) + " of the change table");
      }
      Batch& b = del ? deletes : upserts;
      RowOrigin origin;  // change tables carry no commit times
      origin.op = del       ? RowOrigin::Op::kDelete
                  : op == 4 ? RowOrigin::Op::kUpdate
                            : RowOrigin::Op::kInsert;
      Position::Sequence(st.Int64(ncols + 1)).StampOn(&origin);
      b.origins().push_back(origin);
      for (int c = 0; c < ncols; ++c) {
        Column& col = b.column(static_cast<size_t>(c));
        Status s = AppendValue(st, c + 1, &col);
        if (!s.ok()) {
          return Status::InvalidArgument("table " + stream.name + ", column " +
                                         stream.columns[static_cast<size_t>(c)].name + ", change " +
                                         std::to_string(st.Int64(ncols + 1)) + ": " + s.message());
        }
      }
      if ((++n & 1023) == 0) FaultPoint("source.mid_chunk");
      if (BatchFull(b, batch_rows)) {
        if (!emit(b, del)) return Status::Cancelled("sync stopped");
        b.Clear();
      }
    }
    if (upserts.num_rows() > 0 && !emit(upserts, false)) return Status::Cancelled("sync stopped");
    if (deletes.num_rows() > 0 && !emit(deletes, true)) return Status::Cancelled("sync stopped");
    return Status::OK();
  }

  Status AcknowledgeChanges(const StreamInfo& stream, Position position) override {
    FERRY_ASSIGN_OR_RETURN(auto rw, OpenWriter());
    FERRY_ASSIGN_OR_RETURN(auto st,
                           rw->Prepare("DELETE FROM main." + QuoteIdentifier(ChangeTable(stream)) +
                                       " WHERE _ferry_seq <= ?1"));
    st.Bind(1, position.sequence());
    return st.Exec().WithContext("releasing applied changes of " + stream.name);
  }

  std::string Describe() const override {
    return "SQLite database " + path_ +
           " (full refresh: every table read in one transaction, a consistent point)";
  }

 private:
  Result<StreamInfo> Describe(const std::string& table, bool without_rowid) {
    StreamInfo info;
    info.ns = "main";
    info.name = table;
    FERRY_ASSIGN_OR_RETURN(auto st, db_->Prepare("SELECT name, type, \"notnull\", pk, hidden FROM "
                                                 "pragma_table_xinfo(?1, 'main') ORDER BY cid"));
    st.Bind(1, table);
    std::vector<std::pair<int, std::string>> pk;
    for (;;) {
      FERRY_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row) break;
      if (st.Int64(4) == 1) continue;  // hidden column of a virtual table
      ColumnInfo c;
      c.name = std::string(st.Text(0));
      c.source_type = std::string(st.Text(1));
      c.type = MapDeclaredType(c.source_type);
      c.nullable = st.Int64(2) == 0;
      c.pk_position = static_cast<int>(st.Int64(3));
      if (c.pk_position > 0) pk.emplace_back(c.pk_position, c.name);
      info.columns.push_back(std::move(c));
    }
    std::sort(pk.begin(), pk.end());
    for (auto& [pos, name] : pk) info.primary_key.push_back(name);
    // Key columns are NOT NULL here, whatever the declaration says. An INTEGER PRIMARY KEY is the
    // rowid, and WITHOUT ROWID tables enforce NOT NULL on their key; any other PRIMARY KEY of a
    // rowid table may hold NULL (a quirk SQLite keeps for old files), yet a key must name its row
    // in the destination. A row whose key is NULL is refused when read, naming the row and the fix.
    for (auto& c : info.columns) {
      if (c.pk_position > 0) c.nullable = false;
    }
    for (const auto& c : info.columns) {
      switch (c.type.kind()) {
        case TypeKind::kInt64:
        case TypeKind::kDate:
        case TypeKind::kTimestamp:
        case TypeKind::kTimestampTz:
          info.cursor_candidates.push_back(c.name);
          break;
        default:
          break;
      }
    }
    without_rowid_[table] = without_rowid;
    ChunkKey key = KeyFor(info);
    if (!key.expr.empty()) {
      info.chunking = "ranges of " + key.expr;
    } else if (!key.columns.empty()) {
      info.chunking = "ranges of primary key " + key.RowValue();
    } else {
      info.chunking = "whole table (no key to split on)";
    }
    if (!key.expr.empty()) {
      FERRY_ASSIGN_OR_RETURN(auto range, KeyRange(table, key));
      if (range) {
        // At most one row per key value (the key's span, saturated): cheap, and exact for dense
        // keys; planning counts the rows.
        const __int128 span = static_cast<__int128>(range->second) - range->first + 1;
        info.estimated_rows =
            static_cast<int64_t>(std::min<__int128>(span, std::numeric_limits<int64_t>::max()));
      }
    }
    return info;
  }

  // Converts every row of `st` (the stream's columns, then the chunk key or NULL) into batches.
  Status EmitRows(const StreamInfo& stream, ferry::sqlite::Statement& st,
                  std::shared_ptr<const Schema> schema, size_t batch_rows, bool has_key,
                  const std::function<bool(Batch&)>& emit) {
    if (schema->fields.size() != stream.columns.size()) {
      return Status::Internal("schema does not match table " + stream.name);
    }
    Batch batch(std::move(schema));
    const int ncols = static_cast<int>(stream.columns.size());
    int64_t row_number = 0;
    for (;;) {
      auto more = st.Step();
      if (!more.ok()) return more.status().WithContext("reading table " + stream.name);
      if (!*more) break;
      ++row_number;
      for (int c = 0; c < ncols; ++c) {
        const ColumnInfo& info = stream.columns[static_cast<size_t>(c)];
        if (info.pk_position > 0 && st.IsNull(c)) {
          return NullKey(stream, info.name,
                         has_key ? "the row with rowid " + std::to_string(st.Int64(ncols))
                                 : "row " + std::to_string(row_number) + " read");
        }
        Status s = AppendValue(st, c, &batch.column(static_cast<size_t>(c)));
        if (!s.ok()) {
          std::string where = has_key ? "rowid " + std::to_string(st.Int64(ncols))
                                      : "row " + std::to_string(row_number);
          return Status::InvalidArgument("table " + stream.name + ", column " +
                                         stream.columns[static_cast<size_t>(c)].name + ", " +
                                         where + ": " + s.message());
        }
      }
      if ((row_number & 1023) == 0) FaultPoint("source.mid_chunk");
      if (BatchFull(batch, batch_rows)) {
        if (!emit(batch)) return Status::Cancelled("sync stopped");
        batch.Clear();
      }
    }
    if (batch.num_rows() > 0 && !emit(batch)) return Status::Cancelled("sync stopped");
    return Status::OK();
  }

  static Status NullKey(const StreamInfo& stream, const std::string& column,
                        const std::string& where) {
    return Status::InvalidArgument(
        "table " + stream.name + ", " + where + ": key column " + column +
        " is NULL. SQLite lets a PRIMARY KEY other than INTEGER PRIMARY KEY hold NULL, but ferry "
        "places every row by its key; give the row a key (UPDATE " +
        QuoteIdentifier(stream.name) + " SET " + QuoteIdentifier(column) + " = ... WHERE " +
        QuoteIdentifier(column) +
        " IS NULL), or set the stream's primary_key to columns that are never NULL");
  }

  Status CheckCursor(const StreamInfo& stream, const std::string& cursor) {
    for (const auto& c : stream.columns) {
      if (c.name == cursor) return Status::OK();
    }
    return Status::InvalidArgument("table " + stream.name + " has no column '" + cursor +
                                   "' for the cursor; candidates: " + [&] {
                                     std::string out;
                                     for (const auto& n : stream.cursor_candidates) {
                                       out += (out.empty() ? "" : ", ") + n;
                                     }
                                     return out.empty() ? std::string("(none)") : out;
                                   }());
  }

  // The smallest and largest chunk key, or nullopt for an empty table. Two statements: SQLite
  // answers a lone min() or max() of an indexed key from the b-tree's edge, not by a scan.
  Result<std::optional<std::pair<int64_t, int64_t>>> KeyRange(const std::string& table,
                                                              const ChunkKey& key) {
    int64_t v[2];
    const char* fn[2] = {"min", "max"};
    for (int i = 0; i < 2; ++i) {
      FERRY_ASSIGN_OR_RETURN(auto st, db_->Prepare(std::string("SELECT ") + fn[i] + "(" + key.expr +
                                                   ") FROM main." + QuoteIdentifier(table)));
      FERRY_ASSIGN_OR_RETURN(bool row, st.Step());
      if (!row || st.IsNull(0)) return std::optional<std::pair<int64_t, int64_t>>();
      v[i] = st.Int64(0);
    }
    return std::optional<std::pair<int64_t, int64_t>>(std::make_pair(v[0], v[1]));
  }

  static std::string ChangeTable(const StreamInfo& stream) { return "_ferry_cdc_" + stream.name; }

  Result<std::unique_ptr<Database>> OpenWriter() {
    auto rw = Database::Open(path_, Database::Mode::kReadWrite);
    if (!rw.ok()) {
      return Status(rw.status().code(), rw.status().message() +
                                            " (cdc writes change tables into the database: it "
                                            "needs write access to the file and its folder)");
    }
    return std::move(*rw);
  }

  ChunkKey KeyFor(const StreamInfo& info) {
    auto has_column = [&](const char* n) {
      for (const auto& c : info.columns) {
        std::string lower = c.name;
        std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
        if (lower == n) return true;
      }
      return false;
    };
    if (!without_rowid_[info.name]) {
      for (const char* alias : {"rowid", "_rowid_", "oid"}) {
        if (!has_column(alias)) return ChunkKey{alias, {}};
      }
    }
    // WITHOUT ROWID (or every alias shadowed): split on a single integer primary key.
    if (info.primary_key.size() == 1) {
      for (const auto& c : info.columns) {
        if (c.name == info.primary_key[0] && c.type.kind() == TypeKind::kInt64) {
          return ChunkKey{QuoteIdentifier(c.name), {}};
        }
      }
    }
    // A WITHOUT ROWID table keyed otherwise: ranges of its own primary key (NOT NULL, and the
    // table's b-tree is in its order); a primary_key setting naming other columns reads it whole.
    if (without_rowid_[info.name] && !info.primary_key.empty()) {
      std::vector<std::pair<int, std::string>> own;
      for (const auto& c : info.columns) {
        if (c.pk_position > 0) own.emplace_back(c.pk_position, c.name);
      }
      std::sort(own.begin(), own.end());
      std::vector<std::string> names;
      for (auto& [pos, name] : own) names.push_back(name);
      if (names == info.primary_key) return ChunkKey{"", names};
    }
    return ChunkKey{};
  }

  std::unique_ptr<Database> db_;
  std::string path_;
  std::map<std::string, bool> without_rowid_;
};

}  // namespace

Result<std::unique_ptr<Source>> OpenSqliteSource(config::SourceConfig& cfg) {
  FERRY_ASSIGN_OR_RETURN(std::string path, cfg.options.TakePath("path"));
  FERRY_RETURN_IF_ERROR(cfg.options.CheckAllUsed({"path"}));
  if (!FileExists(path)) {
    return Status::NotFound("SQLite database " + path +
                            " does not exist; check source.path (relative paths are resolved "
                            "against the pipeline file's folder)");
  }
  auto db = Database::Open(path, Database::Mode::kReadOnly);
  if (!db.ok()) {
    return Status(db.status().code(),
                  db.status().message() + " (is source.path a SQLite database file you may read?)");
  }
  return std::unique_ptr<Source>(new SqliteSource(std::move(*db), path));
}

}  // namespace ferry::source
