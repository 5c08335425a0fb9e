#include "ferry/source/mysql/mysql_source.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>
#include <set>

#include "ferry/base/fault.h"
#include "ferry/base/log.h"
#include "ferry/clients/mysql/mysql_conn.h"
#include "ferry/clients/mysql/mysql_server.h"
#include "ferry/source/mysql/mysql_types.h"

namespace ferry::source {
namespace {

using mysql::QuoteIdent;

// What ReadChunk, PlanChunks and the cursor reads need to know about a discovered stream.
struct Table {
  std::string db;
  std::string name;
  bool view = false;
  std::vector<MysqlColumn> columns;  // the stream's columns, in order
  std::vector<MysqlWire> wires;      // per column
  std::vector<std::string> primary_key;
  std::string Qualified() const { return QuoteIdent(db) + "." + QuoteIdent(name); }
  std::string Display() const { return db + "." + name; }
  int Index(const std::string& column) const {
    for (size_t i = 0; i < columns.size(); ++i) {
      if (columns[i].name == column) return static_cast<int>(i);
    }
    return -1;
  }
};

struct Settings {
  mysql::ConnectParams connect;
  std::vector<std::string> databases;  // the first is the default: its streams are unqualified
};

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

int64_t ToInt(const std::optional<std::string>& v) {
  if (!v) return 0;
  int64_t n = 0;
  std::from_chars(v->data(), v->data() + v->size(), n);
  return n;
}

class MysqlSource final : public Source {
 public:
  MysqlSource(Settings s, std::unique_ptr<mysql::Connection> conn, std::string grantee)
      : s_(std::move(s)), conn_(std::move(conn)), grantee_(std::move(grantee)) {}

  Result<std::vector<StreamInfo>> Discover() override {
    std::string in;
    for (const auto& db : s_.databases) in += (in.empty() ? "(" : ", ") + conn_->Literal(db);
    in += ")";
    FERRY_RETURN_IF_ERROR(CheckDatabases(in));
    FERRY_ASSIGN_OR_RETURN(
        auto tables,
        conn_->Query("SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE, TABLE_ROWS, ENGINE"
                     "  FROM information_schema.TABLES WHERE TABLE_SCHEMA IN " +
                         in +
                         " AND TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED', 'VIEW')"
                         " ORDER BY TABLE_SCHEMA, TABLE_NAME",
                     "listing tables"));
    FERRY_ASSIGN_OR_RETURN(Catalog catalog, ReadCatalog(in));
    std::vector<StreamInfo> out;
    tables_.clear();
    std::map<std::string, int> seen;
    for (const auto& r : tables) {
      Table t;
      t.db = r[0].value_or("");
      t.name = r[1].value_or("");
      t.view = r[2].value_or("") == "VIEW";
      t.primary_key = catalog.keys[{t.db, t.name}];
      StreamInfo info =
          DescribeTable(&t, catalog.columns[{t.db, t.name}], ToInt(r[3]), r[4].value_or(""));
      if (++seen[info.name] > 1) {
        AddError(&info, "stream name " + info.name + " names two tables (a table of database " +
                            s_.databases.front() +
                            " whose name contains a dot, and a table of another database); "
                            "rename one of them");
      }
      tables_[info.name] = std::move(t);
      out.push_back(std::move(info));
    }
    return out;
  }

  Status BeginSnapshot() override {
    FERRY_RETURN_IF_ERROR(conn_->Exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"));
    FERRY_RETURN_IF_ERROR(conn_->Exec("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
                                      "opening the snapshot"));
    in_snapshot_ = true;
    // MariaDB says where in the binary log the snapshot stands (the point a binlog reader would
    // start from); empty when the binary log is off, absent on MySQL.
    FERRY_ASSIGN_OR_RETURN(auto r, conn_->Query("SHOW STATUS LIKE 'binlog_snapshot_%'"));
    for (const auto& row : r) {
      if (row.size() < 2 || !row[0] || !row[1]) continue;
      if (Lower(*row[0]) == "binlog_snapshot_file") snapshot_file_ = *row[1];
      if (Lower(*row[0]) == "binlog_snapshot_position") snapshot_offset_ = ToInt(row[1]);
    }
    FERRY_LOG(kDebug) << conn_->ServerName() << " snapshot at binlog "
                      << (snapshot_file_.empty()
                              ? std::string("(off)")
                              : snapshot_file_ + ":" + std::to_string(snapshot_offset_));
    return Status::OK();
  }

  Status EndSnapshot() override {
    if (!in_snapshot_) return Status::OK();
    in_snapshot_ = false;
    return conn_->Exec("COMMIT");
  }

  // The table's primary key when it is one integer column whose values fit 64 bits signed:
  // full refresh splits on its ranges with integer bounds.
  static std::optional<std::string> IntegerKey(const StreamInfo& stream, const Table& t) {
    if (t.view || stream.primary_key.size() != 1 || stream.primary_key != t.primary_key) {
      return std::nullopt;
    }
    const int i = t.Index(stream.primary_key[0]);
    if (i < 0) return std::nullopt;
    const MysqlWire w = t.wires[static_cast<size_t>(i)];
    if (w != MysqlWire::kInt32 && w != MysqlWire::kInt64 && w != MysqlWire::kYear) {
      return std::nullopt;
    }
    return stream.primary_key[0];
  }

  // The table's own primary key when it is not one such integer column but every column of it
  // can be compared with literals of its values (MysqlRangeKey): split on its ranges in the
  // server's order.
  static std::optional<std::vector<std::string>> TupleKey(const StreamInfo& stream,
                                                          const Table& t) {
    if (t.view || t.primary_key.empty() || stream.primary_key != t.primary_key ||
        IntegerKey(stream, t)) {
      return std::nullopt;
    }
    for (const auto& k : t.primary_key) {
      const int i = t.Index(k);
      if (i < 0 ||
          !MysqlRangeKey(t.columns[static_cast<size_t>(i)], t.wires[static_cast<size_t>(i)])) {
        return std::nullopt;
      }
    }
    return t.primary_key;
  }

  static std::string TupleKeyName(const std::vector<std::string>& key) {
    return nlohmann::json(key).dump();
  }

  Result<ChunkPlan> PlanChunks(const StreamInfo& stream, int64_t chunk_rows) override {
    FERRY_ASSIGN_OR_RETURN(const Table* t, Find(stream));
    chunk_rows = std::max<int64_t>(chunk_rows, 1);
    if (auto key = IntegerKey(stream, *t)) {
      const std::string c = QuoteIdent(*key);
      int64_t edges[2];
      const char* order[2] = {"ASC", "DESC"};
      for (int i = 0; i < 2; ++i) {
        FERRY_ASSIGN_OR_RETURN(
            auto r, conn_->Query("SELECT " + c + " FROM " + t->Qualified() + " ORDER BY " + c +
                                 " " + order[i] + " LIMIT 1"));
        if (r.empty() || !r[0][0]) return ChunkPlan{};
        edges[i] = ToInt(r[0][0]);
      }
      if (stream.estimated_rows > 0) {
        if (auto grid = GridPlan(edges[0], edges[1], stream.estimated_rows, chunk_rows)) {
          grid->key = *key;
          return *grid;
        }
      }
      // Sparse or skewed keys (or no estimate): a boundary every chunk_rows keys, found by the
      // server walking the key (WalkBoundaries).
      FERRY_ASSIGN_OR_RETURN(auto walked, WalkBoundaries(*t, {*key}, chunk_rows));
      ChunkPlan plan;
      for (const auto& b : walked) plan.bounds.push_back(std::stoll(b[0].get<std::string>()));
      plan.count = static_cast<int64_t>(plan.bounds.size()) + 1;
      if (!plan.bounds.empty()) plan.first = plan.bounds.front();
      plan.rows = stream.estimated_rows;
      plan.key = *key;
      return plan;
    }
    if (auto key = TupleKey(stream, *t)) {
      ChunkPlan plan;
      plan.key = TupleKeyName(*key);
      FERRY_ASSIGN_OR_RETURN(plan.key_bounds, WalkBoundaries(*t, *key, chunk_rows));
      plan.count = static_cast<int64_t>(plan.key_bounds.size()) + 1;
      plan.rows = stream.estimated_rows;
      return plan;
    }
    return ChunkPlan{};  // read whole
  }

  Result<std::string> StalePlan(const StreamInfo& stream, const ChunkPlan& plan) override {
    FERRY_ASSIGN_OR_RETURN(const Table* t, Find(stream));
    if (!plan.key.empty() && plan.key[0] == '[') {
      auto key = TupleKey(stream, *t);
      if (!key || TupleKeyName(*key) != plan.key) {
        return "columns " + plan.key + " are no longer its primary key";
      }
    } else if (!plan.key.empty()) {
      auto key = IntegerKey(stream, *t);
      if (!key || *key != plan.key) {
        return "column " + plan.key + " is no longer its single integer primary key";
      }
    }
    return std::string();
  }

  Status ReadChunk(const StreamInfo& stream, const Chunk& chunk,
                   std::shared_ptr<const Schema> schema, size_t batch_rows,
                   const std::function<bool(Batch&)>& emit) override {
    FERRY_ASSIGN_OR_RETURN(const Table* t, Readable(stream, *schema, "ReadChunk"));
    std::string sql = "SELECT " + SelectList(*t) + " FROM " + t->Qualified();
    if (!chunk.key.empty() && chunk.key[0] == '[') {
      auto key = TupleKey(stream, *t);
      if (!key || TupleKeyName(*key) != chunk.key) return KeyChanged(*t, chunk.key, "columns");
      std::string where;
      if (!chunk.lo_key.is_null()) {
        FERRY_ASSIGN_OR_RETURN(std::string lo, RowCompare(*t, *key, chunk.lo_key, true));
        where += lo;
      }
      if (!chunk.hi_key.is_null()) {
        FERRY_ASSIGN_OR_RETURN(std::string hi, RowCompare(*t, *key, chunk.hi_key, false));
        where += (where.empty() ? "" : " AND ") + hi;
      }
      if (!where.empty()) sql += " WHERE " + where;
    } else if (!chunk.key.empty()) {
      auto key = IntegerKey(stream, *t);
      if (!key || *key != chunk.key) return KeyChanged(*t, chunk.key, "column");
      const std::string c = QuoteIdent(*key);
      if (chunk.lo) sql += " WHERE " + c + " >= " + std::to_string(*chunk.lo);
      if (chunk.hi) {
        sql += std::string(chunk.lo ? " AND " : " WHERE ") + c + " < " + std::to_string(*chunk.hi);
      }
    }
    return StreamRows(stream, *t, sql, std::move(schema), batch_rows, emit);
  }

  Result<nlohmann::json> MaxCursor(const StreamInfo& stream, const std::string& cursor,
                                   const nlohmann::json& above) override {
    if (!stream.error.empty()) return Status::NotSupported(stream.error);
    FERRY_ASSIGN_OR_RETURN(const Table* t, Find(stream));
    FERRY_ASSIGN_OR_RETURN(CursorColumn cc, CheckCursor(stream, *t, cursor));
    const std::string c = QuoteIdent(cursor);
    std::string where = c + " IS NOT NULL";
    if (!above.is_null()) {
      FERRY_ASSIGN_OR_RETURN(std::string lo, CursorLiteral(*t, cursor, cc, above));
      where += " AND " + c + " > " + lo;
    }
    // ORDER BY ... DESC LIMIT 1: the order the window's comparisons use (the column's type and
    // collation), answered by an index on the column when there is one.
    FERRY_ASSIGN_OR_RETURN(
        auto r, conn_->Query("SELECT " + c + " FROM " + t->Qualified() + " WHERE " + where +
                             " ORDER BY " + c + " DESC LIMIT 1"));
    if (r.empty() || !r[0][0]) return nlohmann::json(nullptr);
    const std::string& text = *r[0][0];
    if (cc.kind.kind == MysqlCursor::Kind::kInteger) {
      if (!text.empty() && text[0] != '-') {
        uint64_t u = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), u);
        if (ec == std::errc() && end == text.data() + text.size()) {
          if (u <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
            return nlohmann::json(static_cast<int64_t>(u));
          return nlohmann::json(u);
        }
      } else {
        int64_t v = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec == std::errc() && end == text.data() + text.size()) return nlohmann::json(v);
      }
      return Status::Internal("table " + t->Display() + ": cursor maximum '" + text +
                              "' of column " + cursor + " is not an integer");
    }
    if (IsTemporal(t->wires[cc.index]) && IsZeroDate(text)) {
      return Status::InvalidArgument(
          "table " + t->Display() + ": the largest value of cursor column " + cursor +
          " is the "
          "zero date " +
          text +
          ", which ferry reads as NULL; give the rows real dates or pick another cursor column "
          "(candidates: " +
          Candidates(stream) + ")");
    }
    return nlohmann::json(text);
  }

  Status ReadCursorRange(const StreamInfo& stream, const std::string& cursor,
                         const CursorRange& range, std::shared_ptr<const Schema> schema,
                         size_t batch_rows, const std::function<bool(Batch&)>& emit) override {
    FERRY_ASSIGN_OR_RETURN(const Table* t, Readable(stream, *schema, "ReadCursorRange"));
    FERRY_ASSIGN_OR_RETURN(CursorColumn cc, CheckCursor(stream, *t, cursor));
    const std::string c = QuoteIdent(cursor);
    // A row whose cursor is NULL satisfies no comparison: it is never read.
    std::string sql =
        "SELECT " + SelectList(*t) + " FROM " + t->Qualified() + " WHERE " + c + " IS NOT NULL";
    if (!range.lower.is_null()) {
      FERRY_ASSIGN_OR_RETURN(std::string lo, CursorLiteral(*t, cursor, cc, range.lower));
      sql += " AND " + c + (range.lower_closed ? " >= " : " > ") + lo;
    }
    if (!range.upper.is_null()) {
      FERRY_ASSIGN_OR_RETURN(std::string hi, CursorLiteral(*t, cursor, cc, range.upper));
      sql += " AND " + c + (range.upper_closed ? " <= " : " < ") + hi;
    }
    sql += " ORDER BY " + c;
    return StreamRows(stream, *t, sql, std::move(schema), batch_rows, emit);
  }

  // cdc and cdc_only: what the server lacks for reading its binary log, then the refusal (this
  // source does not read the binary log).
  Status CheckChangeCapture(const StreamInfo& stream) override {
    std::vector<std::string> lacks;
    FERRY_ASSIGN_OR_RETURN(auto r, conn_->Query("SELECT @@GLOBAL.log_bin, @@GLOBAL.binlog_format, "
                                                "@@GLOBAL.binlog_row_image",
                                                "reading the binary log settings"));
    if (!r.empty() && r[0].size() == 3) {
      const std::string log_bin = r[0][0].value_or("0");
      const std::string format = r[0][1].value_or("");
      const std::string image = r[0][2].value_or("");
      if (log_bin != "1" && Lower(log_bin) != "on") {
        lacks.push_back(
            "the binary log is off (log_bin = OFF): add log_bin = mysql-bin and server_id = 1 "
            "to the [mysqld] section of the server's configuration and restart it");
      }
      if (Lower(format) != "row") {
        lacks.push_back("binlog_format is " + format +
                        ": SET GLOBAL binlog_format = 'ROW' (and binlog_format = ROW in the "
                        "server's configuration, so that a restart keeps it)");
      }
      if (Lower(image) != "full") {
        lacks.push_back("binlog_row_image is " + image +
                        ": SET GLOBAL binlog_row_image = 'FULL' (and in the server's "
                        "configuration)");
      }
    }
    FERRY_ASSIGN_OR_RETURN(auto grants,
                           conn_->Query("SHOW GRANTS FOR CURRENT_USER()", "reading the grants"));
    bool slave = false, client = false;
    for (const auto& g : grants) {
      const std::string text = g.empty() ? "" : g[0].value_or("");
      if (text.find(" ON *.* ") == std::string::npos) continue;
      if (text.find("ALL PRIVILEGES") != std::string::npos) slave = client = true;
      if (text.find("REPLICATION SLAVE") != std::string::npos) slave = true;
      if (text.find("REPLICATION CLIENT") != std::string::npos ||
          text.find("BINLOG MONITOR") != std::string::npos) {
        client = true;
      }
    }
    if (!slave || !client) {
      lacks.push_back(std::string("user ") + grantee_ + " lacks " +
                      (!slave && !client ? "REPLICATION SLAVE and REPLICATION CLIENT"
                       : !slave          ? "REPLICATION SLAVE"
                                         : "REPLICATION CLIENT") +
                      ": GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO " + grantee_);
    }
    std::string m = CdcRefusal(stream);
    if (!lacks.empty()) {
      m += ". For reading the binary log, the server would also need: ";
      for (size_t i = 0; i < lacks.size(); ++i) m += (i ? "; " : "") + lacks[i];
    }
    return Status::NotSupported(m);
  }

  Status PrepareChangeCapture(const StreamInfo& stream) override {
    return Status::NotSupported(CdcRefusal(stream));
  }

  std::string Describe() const override {
    std::string dbs;
    for (const auto& d : s_.databases) dbs += (dbs.empty() ? "" : ", ") + d;
    return conn_->ServerName() + " at " + conn_->Where() + " as " + grantee_ + ", database" +
           (s_.databases.size() > 1 ? "s " : " ") + dbs +
           " (full refresh and incremental windows: every table read in one START TRANSACTION "
           "WITH CONSISTENT SNAPSHOT, a consistent point for InnoDB tables, on one connection; "
           "no cdc)";
  }

 private:
  struct CursorColumn {
    size_t index = 0;
    MysqlCursor kind;
  };

  // Every database named exists and shows the user something.
  Status CheckDatabases(const std::string& in) {
    FERRY_ASSIGN_OR_RETURN(auto schemata,
                           conn_->Query("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE "
                                        "SCHEMA_NAME IN " +
                                            in,
                                        "listing databases"));
    std::set<std::string> present;
    for (const auto& r : schemata) present.insert(r[0].value_or(""));
    for (const auto& db : s_.databases) {
      if (!present.count(db)) {
        return Status::NotFound("database " + QuoteIdent(db) + " does not exist on " +
                                conn_->ServerName() + " at " + conn_->Where() + " (or user " +
                                grantee_ + " may see nothing in it); check source.databases " +
                                "(names are matched exactly, case included)");
      }
    }
    return Status::OK();
  }

  // The columns (invisible ones left out: SELECT * leaves them out too) and primary keys of the
  // tables of the databases `in`, by (database, table).
  using Name = std::pair<std::string, std::string>;
  struct Catalog {
    std::map<Name, std::vector<MysqlColumn>> columns;
    std::map<Name, std::vector<std::string>> keys;  // in key order
  };
  Result<Catalog> ReadCatalog(const std::string& in) {
    FERRY_ASSIGN_OR_RETURN(
        auto columns,
        conn_->Query("SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, DATA_TYPE, COLUMN_TYPE,"
                     "       IS_NULLABLE, NUMERIC_PRECISION, NUMERIC_SCALE, EXTRA,"
                     "       CHARACTER_SET_NAME"
                     "  FROM information_schema.COLUMNS WHERE TABLE_SCHEMA IN " +
                         in + " ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION",
                     "listing columns"));
    FERRY_ASSIGN_OR_RETURN(
        auto keys,
        conn_->Query(
            "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME FROM information_schema.STATISTICS"
            " WHERE TABLE_SCHEMA IN " +
                in +
                " AND INDEX_NAME = 'PRIMARY'"
                " ORDER BY TABLE_SCHEMA, TABLE_NAME, SEQ_IN_INDEX",
            "listing primary keys"));
    Catalog out;
    for (const auto& r : columns) {
      const std::string extra = Lower(r[8].value_or(""));
      if (extra.find("invisible") != std::string::npos) continue;
      MysqlColumn c;
      c.name = r[2].value_or("");
      c.data_type = Lower(r[3].value_or(""));
      c.column_type = r[4].value_or("");
      c.nullable = r[5].value_or("YES") == "YES";
      c.precision = ToInt(r[6]);
      c.scale = ToInt(r[7]);
      c.charset = Lower(r[9].value_or(""));
      out.columns[{r[0].value_or(""), r[1].value_or("")}].push_back(std::move(c));
    }
    for (const auto& r : keys) {
      out.keys[{r[0].value_or(""), r[1].value_or("")}].push_back(r[2].value_or(""));
    }
    return out;
  }

  // The stream of table `t` (its name, view flag and key set): columns and their mapping,
  // cursor candidates, how it is split, and whether the user may read it (a SELECT of its
  // columns with LIMIT 0, which checks table and column privileges alike).
  StreamInfo DescribeTable(Table* t, const std::vector<MysqlColumn>& columns, int64_t rows,
                           const std::string& engine) {
    StreamInfo info;
    info.ns = t->db;
    info.name = t->db == s_.databases.front() ? t->name : t->db + "." + t->name;
    info.primary_key = t->primary_key;
    info.estimated_rows = rows;
    for (MysqlColumn c : columns) {
      auto k = std::find(t->primary_key.begin(), t->primary_key.end(), c.name);
      c.key_position =
          k == t->primary_key.end() ? 0 : static_cast<int>(k - t->primary_key.begin()) + 1;
      MysqlMapping m = MapMysqlColumn(c);
      ColumnInfo ci;
      ci.name = c.name;
      ci.source_type = c.column_type;
      ci.type = m.type;
      ci.nullable = m.nullable;
      ci.pk_position = c.key_position;
      if (!m.error.empty()) AddError(&info, m.error);
      if (m.error.empty() && ClassifyMysqlCursor(c, m.wire).candidate) {
        info.cursor_candidates.push_back(c.name);
      }
      info.columns.push_back(std::move(ci));
      t->wires.push_back(m.wire);
      t->columns.push_back(std::move(c));
    }
    if (t->view) {
      info.chunking = "whole view";
    } else if (auto key = IntegerKey(info, *t)) {
      info.chunking = "ranges of primary key " + *key;
    } else if (auto tuple = TupleKey(info, *t)) {
      std::string names;
      for (const auto& k : *tuple) names += (names.empty() ? "" : ", ") + k;
      info.chunking = "ranges of primary key (" + names + ")";
    } else {
      info.chunking = t->primary_key.empty() ? "whole table (no primary key)"
                                             : "whole table (its key cannot be split)";
    }
    if (!t->view && !engine.empty() && Lower(engine) != "innodb") {
      info.chunking += "; ENGINE=" + engine + " is not read in the snapshot";
    }
    if (t->columns.empty()) {
      AddError(&info, "it has no column ferry can select");
      return info;
    }
    Status st = conn_->Exec("SELECT " + SelectList(*t) + " FROM " + t->Qualified() + " LIMIT 0");
    if (st.code() == StatusCode::kPermissionDenied) {
      AddError(&info, "user " + grantee_ + " may not read " + t->Display() + ": GRANT SELECT ON " +
                          t->Qualified() + " TO " + grantee_);
    } else if (!st.ok()) {
      AddError(&info, "reading it fails: " + conn_->last_error());
    }
    return info;
  }

  static std::string CdcRefusal(const StreamInfo& stream) {
    return "stream " + stream.name +
           ": the MySQL/MariaDB source does not read the binary log (cdc and cdc_only); it "
           "reads full_refresh and incremental streams: set the stream's mode to full_refresh, "
           "or to incremental with a cursor column";
  }

  static bool IsTemporal(MysqlWire w) {
    return w == MysqlWire::kDate || w == MysqlWire::kDatetime || w == MysqlWire::kTimestamp;
  }

  static void AddError(StreamInfo* info, const std::string& e) {
    info->error += (info->error.empty() ? "" : "; ") + e;
  }

  static std::string SelectList(const Table& t) {
    std::string sql;
    for (size_t i = 0; i < t.columns.size(); ++i) {
      sql += (i ? ", " : "") + MysqlSelectExpression(t.columns[i].name, t.wires[i]);
    }
    return sql;
  }

  static Status KeyChanged(const Table& t, const std::string& key, const char* what) {
    return Status::InvalidArgument(
        "the load of " + t.Display() + " was planned on key " + what + " " + key +
        ", which are no longer the table's primary key as planned; move the stream's entry out "
        "of the state file (or the state file away) and sync again");
  }

  static std::string Candidates(const StreamInfo& stream) {
    std::string out;
    for (const auto& n : stream.cursor_candidates) out += (out.empty() ? "" : ", ") + n;
    return out.empty() ? std::string("none") : out;
  }

  Result<const Table*> Find(const StreamInfo& stream) const {
    auto it = tables_.find(stream.name);
    if (it == tables_.end()) {
      return Status::Internal("stream " + stream.name + " was not discovered by this source");
    }
    return &it->second;
  }

  Result<const Table*> Readable(const StreamInfo& stream, const Schema& schema,
                                const char* what) const {
    if (!stream.error.empty()) return Status::NotSupported(stream.error);
    FERRY_ASSIGN_OR_RETURN(const Table* t, Find(stream));
    if (schema.fields.size() != t->columns.size() || stream.columns.size() != t->columns.size()) {
      return Status::Internal(std::string(what) + ": schema does not match table " + t->Display());
    }
    return t;
  }

  // Boundaries of `key` every `chunk_rows` rows in the server's order: the key of row
  // chunk_rows (0-based), then of row chunk_rows after each boundary, until none is left
  // (LIMIT 1 OFFSET n on the primary key: the server walks the index, only the boundaries are
  // sent). Each boundary is an array of the key's values as text (MysqlKeyExpression).
  Result<std::vector<nlohmann::json>> WalkBoundaries(const Table& t,
                                                     const std::vector<std::string>& key,
                                                     int64_t chunk_rows) {
    std::string values, order;
    for (size_t i = 0; i < key.size(); ++i) {
      const int c = t.Index(key[i]);
      values += (i ? ", " : "") + MysqlKeyExpression(key[i], t.wires[static_cast<size_t>(c)]);
      order += (i ? ", " : "") + QuoteIdent(key[i]);
    }
    std::vector<nlohmann::json> out;
    nlohmann::json last;
    for (;;) {
      std::string sql = "SELECT " + values + " FROM " + t.Qualified();
      if (!last.is_null()) {
        FERRY_ASSIGN_OR_RETURN(std::string where, RowCompare(t, key, last, true));
        sql += " WHERE " + where;
      }
      sql += " ORDER BY " + order + " LIMIT 1 OFFSET " + std::to_string(chunk_rows);
      FERRY_ASSIGN_OR_RETURN(auto r, conn_->Query(sql, "planning the chunks of " + t.Display()));
      if (r.empty()) break;
      nlohmann::json b = nlohmann::json::array();
      for (const auto& v : r[0]) {
        if (!v) return Status::Internal("a NULL in the primary key of " + t.Display());
        b.push_back(*v);
      }
      out.push_back(b);
      last = std::move(b);
    }
    return out;
  }

  // The rows whose key is at or after (`lower`) or before `bound` in the key's order, as
  // comparisons of literals: (a > x1 OR (a = x1 AND (b >= x2))) with the first column bounded
  // alone too, so that the index serves it.
  Result<std::string> RowCompare(const Table& t, const std::vector<std::string>& key,
                                 const nlohmann::json& bound, bool lower) {
    if (!bound.is_array() || bound.size() != key.size()) {
      return Status::Corruption("chunk bound " + bound.dump() + " of " + t.Display() +
                                " does not hold one value per key column (state file or marker "
                                "damaged?)");
    }
    std::vector<std::string> lits;
    for (size_t i = 0; i < key.size(); ++i) {
      if (!bound[i].is_string()) {
        return Status::Corruption("chunk bound " + bound.dump() + " of " + t.Display() +
                                  " holds a value that is not text (state file or marker "
                                  "damaged?)");
      }
      const MysqlWire w = t.wires[static_cast<size_t>(t.Index(key[i]))];
      auto lit = MysqlLiteral(w, bound[i].get<std::string>(),
                              [&](std::string_view s) { return conn_->Literal(s); });
      if (!lit.ok()) {
        return Status::Corruption("chunk bound " + bound.dump() + " of " + t.Display() + ": " +
                                  lit.status().message() + " (state file or marker damaged?)");
      }
      lits.push_back(*lit);
    }
    const char* strict = lower ? " > " : " < ";
    const char* last = lower ? " >= " : " < ";
    std::string expr;
    for (size_t i = key.size(); i-- > 0;) {
      const std::string c = QuoteIdent(key[i]);
      if (i + 1 == key.size()) {
        expr = c + last + lits[i];
      } else {
        expr = "(" + c + strict + lits[i] + " OR (" + c + " = " + lits[i] + " AND " + expr + "))";
      }
    }
    const std::string first = QuoteIdent(key[0]);
    if (key.size() > 1) expr = first + (lower ? " >= " : " <= ") + lits[0] + " AND " + expr;
    return "(" + expr + ")";
  }

  Result<CursorColumn> CheckCursor(const StreamInfo& stream, const Table& t,
                                   const std::string& cursor) const {
    const int i = t.Index(cursor);
    if (i < 0) {
      return Status::InvalidArgument("table " + t.Display() + " has no column '" + cursor +
                                     "' for the cursor; candidates: " + Candidates(stream) +
                                     " (names are matched exactly, case included)");
    }
    const auto idx = static_cast<size_t>(i);
    CursorColumn cc{idx, ClassifyMysqlCursor(t.columns[idx], t.wires[idx])};
    if (cc.kind.kind == MysqlCursor::Kind::kRefused) {
      return Status::InvalidArgument(
          "table " + t.Display() + ": column " + cursor + " (" + t.columns[idx].column_type +
          ") cannot be the cursor: " + cc.kind.why +
          "; pick a column of integers, decimals, dates, datetimes, timestamps or text whose "
          "value grows when a row changes (candidates: " +
          Candidates(stream) + ")");
    }
    return cc;
  }

  // A window bound (from the state file or the marker) as a literal: integers from JSON
  // integers, everything else from JSON strings (numbers unquoted, checked to be numbers; other
  // text quoted by the connection's escaping).
  Result<std::string> CursorLiteral(const Table& t, const std::string& cursor,
                                    const CursorColumn& cc, const nlohmann::json& v) {
    const bool integer = cc.kind.kind == MysqlCursor::Kind::kInteger;
    auto wrong = [&] {
      return Status::InvalidArgument(
          "table " + t.Display() + ": cursor value " + v.dump().substr(0, 200) +
          " (from the state file or the table's marker) is not a " +
          (integer ? "JSON integer" : "JSON string") + " as values of column " + cursor + " (" +
          t.columns[cc.index].column_type +
          ") are; did the column's type change? Put the old type back, or start the stream over "
          "(remove it from the state file and drop its destination table)");
    };
    if (integer && v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
    if (integer && v.is_number_integer()) return std::to_string(v.get<int64_t>());
    if (integer || !v.is_string()) return wrong();
    auto lit = MysqlLiteral(t.wires[cc.index], v.get<std::string>(),
                            [&](std::string_view s) { return conn_->Literal(s); });
    if (!lit.ok()) return wrong();
    return *lit;
  }

  // " with `id` = 42" (the key's values as the server sent them), or " number <n>" of the read.
  static std::string RowText(const Table& t, const std::vector<size_t>& keys,
                             const mysql::RowView& row, int64_t n) {
    if (keys.empty()) return "row " + std::to_string(n) + " of the read";
    std::string out = "the row with ";
    for (size_t k = 0; k < keys.size(); ++k) {
      const auto& v = row[keys[k]];
      std::string shown = v ? std::string(v->substr(0, 80)) : "NULL";
      if (t.wires[keys[k]] == MysqlWire::kBinary && v) shown = "(binary)";
      out += (k ? ", " : "") + QuoteIdent(t.columns[keys[k]].name) + " = " + shown;
    }
    return out;
  }

  // Streams the rows of `sql` (SelectList's columns) into batches on `schema` (BatchFull):
  // the server sends them as they are read, so memory stays flat.
  Status StreamRows(const StreamInfo& stream, const Table& t, const std::string& sql,
                    std::shared_ptr<const Schema> schema, size_t batch_rows,
                    const std::function<bool(Batch&)>& emit) {
    std::vector<size_t> keys;
    for (const auto& k : stream.primary_key) {
      const int i = t.Index(k);
      if (i >= 0) keys.push_back(static_cast<size_t>(i));
    }
    Batch batch(std::move(schema));
    const size_t n = t.columns.size();
    int64_t rows = 0;
    bool stopped = false;
    Status s = conn_->Stream(sql, [&](const mysql::RowView& row) -> Status {
      if (row.size() != n) {
        return Status::Internal("table " + t.Display() + ": the server sent " +
                                std::to_string(row.size()) + " columns, not " + std::to_string(n));
      }
      ++rows;
      for (size_t i = 0; i < n; ++i) {
        Column& col = batch.column(i);
        Status st = AppendMysqlValue(t.wires[i], row[i], &col);
        if (st.ok() && row[i] && !col.IsValid(col.size() - 1) &&
            batch.schema()->fields[i].required) {
          st = Status::InvalidArgument(
              "the zero date " + std::string(*row[i]) +
              " in a key column, which Iceberg cannot hold; give the row a real date (UPDATE "
              "... SET " +
              QuoteIdent(t.columns[i].name) +
              " = ...) or set the stream's primary_key to other columns");
        }
        if (!st.ok()) {
          return Status::InvalidArgument(
              "table " + t.Display() + ", column " + QuoteIdent(t.columns[i].name) + " (" +
              t.columns[i].column_type + "), " + RowText(t, keys, row, rows) + ": " + st.message() +
              (st.message().find("; ") == std::string::npos
                   ? "; correct the value at the source, or select the column converted in a "
                     "view"
                   : ""));
        }
      }
      if ((rows & 1023) == 0) FaultPoint("source.mid_chunk");
      if (BatchFull(batch, batch_rows)) {
        if (!emit(batch)) {
          stopped = true;
          return Status::Cancelled("sync stopped");
        }
        batch.Clear();
      }
      return Status::OK();
    });
    if (stopped) return Status::Cancelled("sync stopped");
    if (!s.ok()) {
      if (s.code() == StatusCode::kPermissionDenied) {
        return Status::PermissionDenied("reading " + t.Display() + ": " + conn_->last_error() +
                                        "; GRANT SELECT ON " + t.Qualified() + " TO " + grantee_);
      }
      if (s.message().rfind("table ", 0) == 0) return s;
      return Status(s.code(), "table " + t.Display() + ": " + s.message());
    }
    if (batch.num_rows() > 0 && !emit(batch)) return Status::Cancelled("sync stopped");
    return Status::OK();
  }

  Settings s_;
  std::unique_ptr<mysql::Connection> conn_;
  std::string grantee_;                  // 'user'@'host' as the server knows the session
  std::map<std::string, Table> tables_;  // by stream name
  bool in_snapshot_ = false;
  // Where the snapshot stands in the binary log (MariaDB; empty when the log is off): the point
  // a binlog reader would take the changes after a backfill from.
  std::string snapshot_file_;
  int64_t snapshot_offset_ = 0;
};

std::vector<std::string> SplitList(const std::string& list) {
  std::vector<std::string> out;
  std::string item;
  for (size_t i = 0; i <= list.size(); ++i) {
    if (i == list.size() || list[i] == ',') {
      while (!item.empty() && item.back() == ' ') item.pop_back();
      size_t b = 0;
      while (b < item.size() && item[b] == ' ') ++b;
      if (b < item.size()) out.push_back(item.substr(b));
      item.clear();
    } else {
      item += list[i];
    }
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<Source>> OpenMysqlSource(config::SourceConfig& cfg) {
  config::Options& o = cfg.options;
  FERRY_ASSIGN_OR_RETURN(mysql::Url u, mysql::TakeServerKeys(o, "source"));
  Settings s;
  if (!u.database.empty()) s.databases.push_back(u.database);
  if (auto list = o.TakeOptionalString("databases")) {
    for (auto& d : SplitList(*list)) {
      if (std::find(s.databases.begin(), s.databases.end(), d) == s.databases.end()) {
        s.databases.push_back(std::move(d));
      }
    }
  }
  std::vector<std::string> known = mysql::ServerKeys();
  known.push_back("databases");
  FERRY_RETURN_IF_ERROR(o.CheckAllUsed(known));
  if (s.databases.empty()) {
    return Status::InvalidArgument(
        "source: name the database to read: url: mysql://user:password@host:3306/<database>, "
        "database: <name>, or databases: <name>, <name>");
  }
  // "shop.orders" and "orders" name the same stream of the first database.
  const std::string prefix = s.databases.front() + ".";
  for (auto& sc : cfg.streams) {
    if (sc.name.rfind(prefix, 0) == 0) sc.name = sc.name.substr(prefix.size());
  }
  s.connect.host = u.host;
  s.connect.port = u.port;
  s.connect.user = u.user;
  s.connect.password = u.password;
  s.connect.database = s.databases.front();
  s.connect.setting = "source";
  s.connect.denied_fix = "give user '" + u.user + "' SELECT on the tables ferry reads (GRANT " +
                         "SELECT ON " + QuoteIdent(s.databases.front()) + ".* TO '" + u.user + "')";
  FERRY_ASSIGN_OR_RETURN(auto conn, mysql::Connection::Connect(s.connect));
  FERRY_ASSIGN_OR_RETURN(auto who, conn->Query("SELECT CURRENT_USER()", "reading the user"));
  std::string grantee = "'" + u.user + "'";
  if (!who.empty() && who[0][0]) {
    const std::string& cu = *who[0][0];
    const size_t at = cu.rfind('@');
    if (at != std::string::npos) {
      grantee = conn->Literal(cu.substr(0, at)) + "@" + conn->Literal(cu.substr(at + 1));
    }
  }
  return std::unique_ptr<Source>(new MysqlSource(std::move(s), std::move(conn), grantee));
}

}  // namespace ferry::source
