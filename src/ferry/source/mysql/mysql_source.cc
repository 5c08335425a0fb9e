#include "ferry/source/mysql/mysql_source.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>
#include <set>

#include "ferry/base/fault.h"
#include "ferry/base/log.h"
#include "ferry/clients/mysql/binlog_stream.h"
#include "ferry/clients/mysql/mysql_conn.h"
#include "ferry/clients/mysql/mysql_server.h"
#include "ferry/source/mysql/binlog_changes.h"
#include "ferry/source/mysql/binlog_events.h"
#include "ferry/source/mysql/binlog_statements.h"
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
  // Every column of the table in its order (invisible ones too): how a table map without column
  // names (binlog_row_metadata below FULL) lines up with the stream's columns.
  std::vector<std::string> ordinal;
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
  uint32_t server_id = 0;              // the binary log reader's replica id
  bool ignore_truncate = false;        // source.truncate: ignore
  int heartbeat_ms = 1000;
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
      t.ordinal = catalog.ordinal[{t.db, t.name}];
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
    std::string sql = "SELECT " + SelectList(*t, stream) + " FROM " + t->Qualified();
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
    if (const std::string p = stream.Problem(); !p.empty()) return Status::NotSupported(p);
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
    std::string sql = "SELECT " + SelectList(*t, stream) + " FROM " + t->Qualified() + " WHERE " +
                      c + " IS NOT NULL";
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

  // cdc and cdc_only: what the server lacks for reading its binary log, each with the statement
  // that fixes it, and the stream's key.
  Status CheckChangeCapture(const StreamInfo& stream) override {
    FERRY_ASSIGN_OR_RETURN(const Table* t, Find(stream));
    std::vector<std::string> lacks;
    if (t->view) {
      lacks.push_back(t->Display() +
                      " is a view: the binary log holds the changes of tables; follow the "
                      "tables it reads, or read the view with mode: full_refresh");
    }
    if (stream.primary_key.empty()) {
      lacks.push_back("table " + t->Display() +
                      " has no primary key, so its changes cannot be matched to rows in the "
                      "destination: ALTER TABLE " +
                      t->Qualified() +
                      " ADD PRIMARY KEY (...), or set the stream's primary_key to columns that "
                      "identify a row");
    }
    FERRY_ASSIGN_OR_RETURN(auto r, conn_->Query("SELECT @@GLOBAL.log_bin, @@GLOBAL.binlog_format, "
                                                "@@GLOBAL.binlog_row_image",
                                                "reading the binary log settings"));
    if (!metadata_checked_) {
      metadata_checked_ = true;
      // MariaDB 10.5+ and MySQL 8.0+: column names in the log's table maps.
      auto m = conn_->Query("SELECT @@GLOBAL.binlog_row_metadata");
      if (m.ok() && !m->empty() && (*m)[0][0] && Lower(*(*m)[0][0]) != "full") {
        FERRY_LOG(kWarn) << "binlog_row_metadata is " << *(*m)[0][0] << " on "
                         << conn_->ServerName()
                         << ": the binary log's rows carry no column names, so ferry matches "
                            "them by position (a column added other than at the end stops a "
                            "sync that reads changes from before it); SET GLOBAL "
                            "binlog_row_metadata = 'FULL' (and in the server's configuration)";
      }
    }
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
    if (lacks.empty()) return Status::OK();
    std::string m = "stream " + stream.name + " (cdc) reads the server's binary log, which needs: ";
    for (size_t i = 0; i < lacks.size(); ++i) m += (i ? "; " : "") + lacks[i];
    return Status::InvalidArgument(m);
  }

  Status PrepareChangeCapture(const StreamInfo& stream) override {
    return CheckChangeCapture(stream);
  }

  Position::Kind position_kind() const override { return Position::Kind::kBinlog; }
  bool SharedChangeLog() const override { return true; }

  // Inside the snapshot: where it stands (every transaction before it is in what the snapshot
  // reads); otherwise the log's end now.
  Result<Position> ChangeLogEnd(const StreamInfo& stream) override {
    if (in_snapshot_ && !snapshot_file_.empty()) return SnapshotLogPosition();
    (void)stream;
    FERRY_ASSIGN_OR_RETURN(LogEnd end, ReadLogEnd());
    return end.position;
  }

  Position SnapshotLogPosition() const override {
    if (snapshot_file_.empty()) return {};
    auto n = mysql::BinlogFileNumber(snapshot_file_);
    if (!n.ok()) return {};
    return Position::Binlog(*n, static_cast<uint64_t>(snapshot_offset_));
  }

  Result<SharedRead> ReadSharedChanges(
      const std::vector<SharedStream>& streams, const SharedReadOptions& options,
      const std::function<bool(size_t stream, Batch&, bool deletes)>& emit,
      const std::function<bool(Position position, const std::vector<std::string>& table_ids)>&
          checkpoint) override {
    SharedRead out;
    if (streams.empty()) return out;
    Pass pass;
    stream_keys_.clear();
    std::vector<BinlogTable> tables;
    Position start;
    for (size_t i = 0; i < streams.size(); ++i) {
      const SharedStream& ss = streams[i];
      FERRY_ASSIGN_OR_RETURN(const Table* t, Find(*ss.info));
      if (ss.position.none()) {
        return Status::Internal("stream " + ss.info->name + " has no binary log position");
      }
      BinlogTable bt;
      bt.stream = ss.info->name;
      bt.display = t->Display();
      for (const auto& c : t->columns) bt.columns.push_back(c.name);
      bt.wires = t->wires;
      for (const auto& k : ss.info->primary_key) {
        const int c = t->Index(k);
        if (c < 0) {
          return Status::InvalidArgument("stream " + ss.info->name + ": key column " + k +
                                         " is not a column of " + t->Display());
        }
        bt.key.push_back(static_cast<size_t>(c));
      }
      bt.schema = ss.schema;
      bt.position = ss.position;
      stream_keys_.push_back(bt.key);
      pass.followed[{t->db, t->name}] = i;
      pass.tables.push_back(t);
      start = i == 0 ? ss.position : std::min(start, ss.position);
      tables.push_back(std::move(bt));
    }
    FERRY_ASSIGN_OR_RETURN(LogEnd end, ReadLogEnd());
    const bool follow = options.follow;
    if (!follow && end.position <= start) return out;  // nothing was written since
    FERRY_ASSIGN_OR_RETURN(auto stream, OpenDump(start, /*until_end=*/!follow));
    FERRY_LOG(kInfo) << "reading the binary log of " << stream->Describe() << " from "
                     << start.ToString()
                     << (follow ? std::string(" on, until stopped")
                                : " up to " + end.position.ToString());

    BinlogChanges changes(std::move(tables));
    std::unique_ptr<ChangeSpill> spill;
    if (options.memory_limit > 0 && !options.spill_dir.empty()) {
      spill = std::make_unique<ChangeSpill>(options.spill_dir, "temp_dir");
      changes.SetSpill(spill.get(), options.memory_limit);
    }
    const std::vector<std::string> no_ids(streams.size());
    Position boundary = start;  // every transaction before it was read
    bool in_txn = false;
    bool standalone = false;  // a MariaDB GTID group of one statement (DDL)
    int64_t row_changes = 0;
    auto flush = [&](Position at) -> Status {
      FERRY_RETURN_IF_ERROR(changes.TakeBatches(options.batch_rows, emit));
      if (!checkpoint(at, no_ids)) return Status::Cancelled("sync stopped");
      out.position = at;
      if (options.trigger) options.trigger->Taken();
      return Status::OK();
    };
    int64_t commit_time_us = 0;  // the transaction that just ended: when the server logged it
    auto due = [&](bool quiet) {
      if (!options.trigger) return false;
      return options.trigger->Due({changes.pending_changes(), changes.pending_bytes(),
                                   boundary > out.position, quiet, quiet ? 0 : commit_time_us});
    };
    Status result;
    // At a transaction boundary: whether the read ends here (`result` says how).
    auto ends_here = [&](bool quiet) {
      if (!follow && boundary >= end.position) {
        result = flush(boundary);
        return true;
      }
      if (follow && options.stopping && options.stopping()) {
        result = Status::Cancelled("stop requested");
        return true;
      }
      if (due(quiet)) {
        result = flush(boundary);
        if (!result.ok()) return true;
      }
      return false;
    };
    // A transaction (or a statement outside one) ended where the next event starts.
    auto ended = [&](Position at) {
      changes.Commit(at, commit_time_us);
      in_txn = standalone = false;
      boundary = std::max(boundary, at);
      return ends_here(/*quiet=*/false);
    };

    binlog::FormatDescription fd;
    fd.checksum = end.checksum;
    std::string file = FileName(start.binlog_file());
    uint32_t file_number = start.binlog_file();
    std::vector<std::optional<std::string_view>> before_row, after_row;
    for (;;) {
      auto next = stream->Next();
      if (!next.ok()) {
        result = next.status();
        break;
      }
      if (!*next) {  // the log's end (a read up to the end as of the call)
        result = flush(boundary);
        break;
      }
      const std::string_view event = **next;
      binlog::EventHeader h;
      std::string_view body;
      if (event.size() > 4 && static_cast<uint8_t>(event[4]) == binlog::kFormatDescriptionEvent) {
        auto parsed = binlog::ParseFormatDescription(event);
        if (!parsed.ok()) {
          result = parsed.status().WithContext("binary log " + file);
          break;
        }
        fd = std::move(*parsed);
        continue;
      }
      Status ps = binlog::ParseEvent(event, fd, &h, &body);
      if (!ps.ok()) {
        result = ps.WithContext("binary log " + file);
        break;
      }
      const Position here = Position::Binlog(file_number, h.log_pos);
      switch (h.type) {
        case binlog::kRotateEvent: {
          auto rot = binlog::ParseRotate(body);
          if (!rot.ok()) {
            result = rot.status();
            break;
          }
          auto n = mysql::BinlogFileNumber(rot->file);
          if (!n.ok()) {
            result = n.status();
            break;
          }
          file = rot->file;
          file_number = *n;
          // A rotation at a file's end (not the dump's first, artificial one) moves every
          // position to the next file.
          if ((h.flags & binlog::kArtificialEventFlag) == 0 && h.timestamp != 0 && !in_txn) {
            boundary = std::max(boundary, Position::Binlog(file_number, rot->position));
          }
          continue;
        }
        case binlog::kHeartbeatEvent:
        case binlog::kHeartbeatV2Event:
          if (!in_txn && h.log_pos != 0) boundary = std::max(boundary, here);
          if (!in_txn && ends_here(/*quiet=*/true)) break;
          continue;
        case binlog::kMariaGtidEvent: {
          auto g = binlog::ParseMariaGtid(h, body);
          if (!g.ok()) {
            result = g.status();
            break;
          }
          in_txn = !g->standalone();
          standalone = g->standalone();
          continue;
        }
        case binlog::kQueryEvent: {
          auto q = binlog::ParseQuery(body, fd);
          if (!q.ok()) {
            result = q.status();
            break;
          }
          const std::vector<SqlToken> tok = SqlTokens(q->sql);
          auto only = [&](std::string_view w) { return tok.size() == 1 && tok[0].Is(w); };
          const bool xa = tok.size() >= 2 && tok[0].Is("XA");
          if (only("BEGIN") || (xa && tok[1].Is("START"))) {
            in_txn = true;
            continue;
          }
          // ROLLBACK (not ROLLBACK TO SAVEPOINT) is logged for changes of non-transactional
          // tables, which stay: the group ends like a commit.
          if (only("COMMIT") || only("ROLLBACK") ||
              (xa && (tok[1].Is("COMMIT") || tok[1].Is("ROLLBACK")))) {
            commit_time_us = int64_t{h.timestamp} * 1000000;
            if (ended(here)) break;
            continue;
          }
          // A statement (DDL): a TRUNCATE, DROP or RENAME of a followed table stops the read
          // before it (source.truncate: ignore goes on).
          std::string what = UnfollowableStatement(
              q->sql, q->database, [&](const std::string& db, const std::string& table) {
                return pass.followed.count({db, table}) > 0;
              });
          if (!what.empty()) {
            if (s_.ignore_truncate) {
              FERRY_LOG(kWarn) << what << " at " << boundary.ToString()
                               << " ignored (source.truncate: ignore): the destination keeps "
                                  "its rows";
            } else {
              changes.DropTransaction();
              result = flush(boundary);
              if (result.ok()) {
                result = Status::InvalidArgument(
                    what + " on the source (after binary log position " + boundary.ToString() +
                    "): the destination's rows would no longer match it. Drop the destination "
                    "table and remove the stream's entry from the state file (a new backfill "
                    "loads it again), or set source.truncate: ignore to keep the destination's "
                    "rows and go on");
              }
              break;
            }
          }
          if (!in_txn || standalone) {
            commit_time_us = int64_t{h.timestamp} * 1000000;
            if (ended(here)) break;
          }
          continue;
        }
        case binlog::kXidEvent:
        case kXaPrepareEvent:  // an XA transaction's changes end their group at its PREPARE
          commit_time_us = int64_t{h.timestamp} * 1000000;
          if (ended(here)) break;
          continue;
        case binlog::kMysqlGtidEvent:
        case binlog::kAnonymousGtidEvent:
          continue;  // a MySQL transaction begins (its BEGIN follows): no boundary here
        case binlog::kTableMapEvent: {
          if (pass.Known(body)) continue;
          auto map = binlog::ParseTableMap(body, fd);
          if (!map.ok()) {
            result = map.status().WithContext("binary log " + file);
            break;
          }
          auto restart = pass.Map(std::move(*map), body, this);
          if (!restart.ok()) {
            result = restart.status();
            break;
          }
          if (!restart->empty()) {
            // Stop before this transaction: what came before it lands, then a rediscovery.
            changes.DropTransaction();
            result = flush(boundary);
            if (result.ok()) {
              out.restart = *restart;
              FERRY_LOG(kInfo) << *restart << " (in the transaction after " << boundary.ToString()
                               << "): rediscovering the table before going on";
            }
            break;
          }
          continue;
        }
        case binlog::kQueryCompressedEvent:
        case binlog::kWriteRowsCompressedV1:
        case binlog::kUpdateRowsCompressedV1:
        case binlog::kDeleteRowsCompressedV1:
        case binlog::kTransactionPayloadEvent:
          result = Status::NotSupported(
              "the binary log holds compressed events (" + file + ", at " + here.ToString() +
              "), which ferry does not read: SET GLOBAL log_bin_compress = OFF (MariaDB) or "
              "binlog_transaction_compression = OFF (MySQL); a new backfill is needed for the "
              "changes logged compressed");
          break;
        default:
          if (binlog::IsRowsEvent(h.type)) {
            auto rows = binlog::ParseRowsEvent(h, body, fd);
            if (!rows.ok()) {
              result = rows.status().WithContext("binary log " + file);
              break;
            }
            Mapped* m = pass.Of(rows->table_id);
            if (m == nullptr) continue;  // a table not followed: its rows are not decoded
            const size_t t = m->stream;
            const size_t n = changes.tables()[t].columns.size();
            // An UPDATE's whole before image, when its row moved to another key (`before` holds
            // the key alone: SetBeforeColumns). Made once per event, not per row.
            const std::function<Result<const std::vector<std::optional<std::string_view>>*>()>
                whole_before =
                    [&]() -> Result<const std::vector<std::optional<std::string_view>>*> {
              FERRY_ASSIGN_OR_RETURN(const binlog::RowImage* whole, m->decoder->FullBefore());
              m->Project(*whole, n, &before_row);
              return &before_row;
            };
            Status ds = m->decoder->Decode(
                *rows,
                [&](const binlog::RowImage& before, const binlog::RowImage& after) -> Status {
                  if ((++row_changes & 1023) == 0) FaultPoint("source.mid_transaction");
                  m->Project(before, n, &before_row);
                  m->Project(after, n, &after_row);
                  switch (rows->kind) {
                    case binlog::RowsEvent::Kind::kWrite:
                      return changes.Put(t, RowOrigin::Op::kInsert, after_row, &m->typed);
                    case binlog::RowsEvent::Kind::kDelete:
                      return changes.Put(t, RowOrigin::Op::kDelete, before_row, &m->typed);
                    case binlog::RowsEvent::Kind::kUpdate:
                      return changes.Update(t, before_row, after_row, &m->typed, whole_before);
                  }
                  return Status::OK();
                });
            if (!ds.ok()) {
              result = Status(ds.code(), "table " + changes.tables()[t].display + " (binary log " +
                                             file + ", before " + here.ToString() +
                                             "): " + ds.message());
              break;
            }
            continue;
          }
          // Anything else outside a transaction (GTID lists, checkpoints, ...) is a boundary.
          if (!in_txn && h.log_pos != 0) {
            boundary = std::max(boundary, here);
            if (ends_here(/*quiet=*/true)) break;
          }
          continue;
      }
      break;  // a case that broke out of the switch ends the read
    }
    if (!result.ok()) return result;
    return out;
  }

  // The binary log needs no acknowledgement: the server keeps its files for as long as it is
  // configured to (binlog_expire_logs_seconds), whoever reads them.
  Status AcknowledgeSharedLog(Position position) override {
    (void)position;
    return Status::OK();
  }

  // For verify: reads the log from `position` to its end (up to kPeekEvents events) for a change
  // of the stream's table in a transaction ending after it.
  Result<PendingChanges> SharedLogPending(const StreamInfo& stream, Position position) override {
    FERRY_ASSIGN_OR_RETURN(const Table* t, Find(stream));
    PendingChanges out;
    FERRY_ASSIGN_OR_RETURN(LogEnd end, ReadLogEnd());
    out.log_end = end.position;
    if (end.position <= position) {
      out.kind = PendingChanges::Kind::kNone;
      out.detail = "nothing was written to the log after it";
      return out;
    }
    auto stream_or = OpenDump(position, /*until_end=*/true);
    if (!stream_or.ok()) {
      out.detail = "the log could not be read: " + stream_or.status().message();
      return out;
    }
    auto& dump = *stream_or;
    binlog::FormatDescription fd;
    fd.checksum = end.checksum;
    std::set<uint64_t> ids;  // table ids of the table
    size_t seen = 0;
    for (; seen < kPeekEvents; ++seen) {
      auto next = dump->Next();
      if (!next.ok()) {
        out.detail = "the log could not be read: " + next.status().message();
        return out;
      }
      if (!*next) break;
      const std::string_view event = **next;
      if (event.size() > 4 && static_cast<uint8_t>(event[4]) == binlog::kFormatDescriptionEvent) {
        auto parsed = binlog::ParseFormatDescription(event);
        if (parsed.ok()) fd = std::move(*parsed);
        continue;
      }
      binlog::EventHeader h;
      std::string_view body;
      if (!binlog::ParseEvent(event, fd, &h, &body).ok()) continue;
      if (h.type == binlog::kTableMapEvent) {
        auto map = binlog::ParseTableMap(body, fd);
        if (map.ok() && map->database == t->db && map->table == t->name) ids.insert(map->table_id);
      } else if (binlog::IsRowsEvent(h.type)) {
        auto rows = binlog::ParseRowsEvent(h, body, fd);
        if (rows.ok() && ids.count(rows->table_id)) {
          out.kind = PendingChanges::Kind::kSome;
          out.detail = "a change of it in the binary log before " +
                       Position::Binlog(position.binlog_file(), h.log_pos).ToString();
          return out;
        }
      }
    }
    if (seen >= kPeekEvents) {
      out.detail = "more than " + std::to_string(kPeekEvents) + " events are in the log";
      return out;
    }
    out.kind = PendingChanges::Kind::kNone;
    out.detail = "none of the log's changes up to " + end.position.ToString() + " is of it";
    return out;
  }

  std::string Describe() const override {
    std::string dbs;
    for (const auto& d : s_.databases) dbs += (dbs.empty() ? "" : ", ") + d;
    return conn_->ServerName() + " at " + conn_->Where() + " as " + grantee_ + ", database" +
           (s_.databases.size() > 1 ? "s " : " ") + dbs +
           " (full refresh and incremental windows: every table read in one START TRANSACTION "
           "WITH CONSISTENT SNAPSHOT, a consistent point for InnoDB tables, on one connection; "
           "cdc: the binary log, read as replica " +
           std::to_string(s_.server_id) + ", from the snapshot's exact position)";
  }

 private:
  // XA_PREPARE_LOG_EVENT (MariaDB 10.5+, MySQL): the end of an XA transaction's first group.
  static constexpr uint8_t kXaPrepareEvent = 38;
  // How many events SharedLogPending reads at most.
  static constexpr size_t kPeekEvents = 1000000;

  // The binary log's end and form.
  struct LogEnd {
    Position position;
    bool checksum = false;  // events carry a CRC32
  };
  Result<LogEnd> ReadLogEnd() {
    const bool mysql84 = !conn_->flavor().mariadb && conn_->flavor().version >= 80400;
    FERRY_ASSIGN_OR_RETURN(
        auto r, conn_->Query(mysql84 ? "SHOW BINARY LOG STATUS" : "SHOW MASTER STATUS",
                             "reading the binary log position (needs REPLICATION CLIENT: GRANT "
                             "REPLICATION CLIENT ON *.* TO " +
                                 grantee_ + ")"));
    if (r.empty() || r[0].size() < 2 || !r[0][0] || !r[0][1]) {
      return Status::InvalidArgument(
          "the binary log is off on " + conn_->ServerName() + " at " + conn_->Where() +
          ": cdc reads it; add log_bin = mysql-bin and server_id = 1 to the [mysqld] section of "
          "the server's configuration and restart it (ferry check lists what else it needs)");
    }
    const std::string& file = *r[0][0];
    FERRY_ASSIGN_OR_RETURN(uint32_t n, mysql::BinlogFileNumber(file));
    const size_t dot = file.rfind('.');
    log_base_ = file.substr(0, dot);
    log_digits_ = file.size() - dot - 1;
    FERRY_ASSIGN_OR_RETURN(
        auto c, conn_->Query("SELECT @@GLOBAL.binlog_checksum", "reading the binary log settings"));
    LogEnd out;
    out.position = Position::Binlog(n, static_cast<uint64_t>(ToInt(r[0][1])));
    out.checksum = !c.empty() && c[0][0] && Lower(*c[0][0]) != "none";
    return out;
  }

  // The name of binary log file number n ("binlog.000003"), as the server names its files.
  std::string FileName(uint32_t n) const {
    std::string digits = std::to_string(n);
    if (digits.size() < log_digits_) digits.insert(0, log_digits_ - digits.size(), '0');
    return log_base_ + "." + digits;
  }

  Result<std::unique_ptr<LogWatch>> OpenLogWatch() override {
    FERRY_ASSIGN_OR_RETURN(auto conn, mysql::Connection::Connect(s_.connect));
    return std::unique_ptr<LogWatch>(new BinlogWatch(std::move(conn)));
  }

  // The binary log as another session sees it: the bytes of log past what ferry committed. The
  // server keeps its files by its own retention, not for ferry: nothing is "retained".
  class BinlogWatch final : public LogWatch {
   public:
    explicit BinlogWatch(std::unique_ptr<mysql::Connection> conn) : conn_(std::move(conn)) {}
    Result<LogStatus> Look(Position confirmed) override {
      LogStatus out;
      if (confirmed.kind() != Position::Kind::kBinlog) return out;
      FERRY_ASSIGN_OR_RETURN(auto logs,
                             conn_->Query("SHOW BINARY LOGS", "listing the binary logs"));
      uint64_t behind = 0;
      for (const auto& l : logs) {
        if (l.size() < 2 || !l[0] || !l[1]) continue;
        auto n = mysql::BinlogFileNumber(*l[0]);
        if (!n.ok()) continue;
        const uint64_t size = static_cast<uint64_t>(ToInt(l[1]));
        if (*n > confirmed.binlog_file()) {
          behind += size;
        } else if (*n == confirmed.binlog_file() && size > confirmed.binlog_offset()) {
          behind += size - confirmed.binlog_offset();
        }
      }
      out.behind_bytes = behind;
      return out;
    }

   private:
    std::unique_ptr<mysql::Connection> conn_;
  };

  Status CheckChangesRetained(const StreamInfo& stream, Position position) override {
    (void)stream;
    if (position.kind() != Position::Kind::kBinlog) return Status::OK();
    FERRY_RETURN_IF_ERROR(ReadLogEnd().status());  // how the server names its files
    return Retained(position);
  }

  // Whether the server still has the binary log file of `at`: kNotFound naming the fix if not.
  Status Retained(Position at) {
    const std::string file = FileName(at.binlog_file());
    FERRY_ASSIGN_OR_RETURN(auto logs, conn_->Query("SHOW BINARY LOGS", "listing the binary logs"));
    bool present = false;
    std::string oldest;
    for (const auto& l : logs) {
      if (l.empty() || !l[0]) continue;
      if (oldest.empty()) oldest = *l[0];
      present = present || *l[0] == file;
    }
    if (!present) {
      return Status::NotFound(
          "the changes after binary log position " + at.ToString() + " are gone from " +
          conn_->ServerName() + " at " + conn_->Where() + ": its oldest binary log is " +
          (oldest.empty() ? std::string("none") : oldest) + ", not " + file +
          " (purged by binlog_expire_logs_seconds / expire_logs_days or PURGE BINARY LOGS before "
          "ferry read them). A new backfill loads the tables again: drop the destination tables "
          "and remove the streams' entries from the state file, then sync; keep binary logs "
          "longer than the time between syncs");
    }
    return Status::OK();
  }

  // A dump of the log from `at`, once the server is known to still have its file.
  Result<std::unique_ptr<mysql::BinlogStream>> OpenDump(Position at, bool until_end,
                                                        uint32_t server_id = 0) {
    FERRY_RETURN_IF_ERROR(Retained(at));
    const std::string file = FileName(at.binlog_file());
    mysql::BinlogDump dump;
    dump.file = file;
    dump.offset = at.binlog_offset();
    dump.server_id = server_id != 0 ? server_id : s_.server_id;
    dump.heartbeat_ms = s_.heartbeat_ms;
    dump.until_end = until_end;
    return mysql::BinlogStream::Open(s_.connect, dump);
  }

  // Whether the table's columns now (information_schema) are those it was discovered with: names
  // in order, invisible ones included, and types.
  Result<bool> DiscoveredIsCurrent(const Table& t) {
    FERRY_ASSIGN_OR_RETURN(
        auto r, conn_->Query("SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS "
                             "WHERE TABLE_SCHEMA = " +
                                 conn_->Literal(t.db) + " AND TABLE_NAME = " +
                                 conn_->Literal(t.name) + " ORDER BY ORDINAL_POSITION",
                             "reading the columns of " + t.Display()));
    if (r.size() != t.ordinal.size()) return false;
    for (size_t i = 0; i < r.size(); ++i) {
      const std::string name = r[i][0].value_or("");
      if (name != t.ordinal[i]) return false;
      const int c = t.Index(name);
      if (c >= 0 && t.columns[static_cast<size_t>(c)].column_type != r[i][1].value_or("")) {
        return false;
      }
    }
    return true;
  }

  // A table map of a followed table, lined up with its stream's columns.
  struct Mapped {
    size_t stream = 0;
    std::string body;  // the TABLE_MAP event's body: the server sends it again and again
    std::unique_ptr<binlog::RowDecoder> decoder;  // the map, with a form per map column
    std::vector<int> to_stream;                   // per map column: the stream column, or -1
    std::vector<bool> typed;  // per stream column: its values come in binary form
    // A row image in stream column order (columns the map lacks are NULL).
    void Project(const binlog::RowImage& image, size_t n,
                 std::vector<std::optional<std::string_view>>* row) const {
      row->assign(n, std::nullopt);
      for (size_t i = 0; i < image.size() && i < to_stream.size(); ++i) {
        if (to_stream[i] >= 0) (*row)[static_cast<size_t>(to_stream[i])] = image[i];
      }
    }
  };
  // What one read of the log knows of the followed tables.
  struct Pass {
    std::map<std::pair<std::string, std::string>, size_t> followed;  // (db, table) -> stream
    std::vector<const Table*> tables;                                // per stream
    std::map<uint64_t, Mapped> maps;                                 // by the log's table id
    // Per table (Display()): whether its discovery is the table as it is now, once asked.
    std::map<std::string, bool> current;
    Mapped* Of(uint64_t id) {
      auto it = maps.find(id);
      return it == maps.end() ? nullptr : &it->second;
    }
    // Whether `body` is the TABLE_MAP event already lined up for its table id (MariaDB sends
    // one before every statement's rows): nothing to do again.
    bool Known(std::string_view body) const {
      if (body.size() < 6) return false;
      uint64_t id = 0;
      for (int i = 5; i >= 0; --i)
        id = id << 8 | static_cast<uint8_t>(body[static_cast<size_t>(i)]);
      auto it = maps.find(id);
      return it != maps.end() && it->second.body == body;
    }
    // Lines `map` up with its stream (nothing for a table not followed). A sentence when the
    // table has columns its discovery lacks (a rediscovery is due); an error when the log's
    // columns cannot be matched with the table's.
    Result<std::string> Map(binlog::TableMap map, std::string_view body, MysqlSource* src);
  };

  // Whether a table map's column has the type discovery found for `c` (MYSQL_TYPE_* codes;
  // decimals with their precision and scale). Types whose change does not change the Iceberg
  // type (text lengths, character sets) are not compared.
  static bool SameLogType(const binlog::MapColumn& m, const MysqlColumn& c) {
    const std::string& d = c.data_type;
    auto is = [&](std::initializer_list<int> codes) {
      for (int code : codes) {
        if (m.type == code) return true;
      }
      return false;
    };
    if (d == "tinyint") return is({1});
    if (d == "smallint") return is({2});
    if (d == "mediumint") return is({9});
    if (d == "int" || d == "integer") return is({3});
    if (d == "bigint") return is({8});
    if (d == "float") return is({4});
    if (d == "double" || d == "real") return is({5});
    if (d == "decimal" || d == "numeric") {
      return is({246}) && (m.meta >> 8) == c.precision && (m.meta & 0xff) == c.scale;
    }
    if (d == "bit") return is({16});
    if (d == "date") return is({10, 14});
    if (d == "datetime") return is({12, 18});
    if (d == "timestamp") return is({7, 17});
    if (d == "time") return is({11, 19});
    if (d == "year") return is({13});
    return true;
  }

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
    std::map<Name, std::vector<std::string>> keys;     // in key order
    std::map<Name, std::vector<std::string>> ordinal;  // every column, invisible ones too
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
      out.ordinal[{r[0].value_or(""), r[1].value_or("")}].push_back(r[2].value_or(""));
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
      ci.error = m.error;
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

  // The stream's columns (all of the table's, or those a transform chose), as StreamRows reads
  // them.
  static std::string SelectList(const Table& t, const StreamInfo& stream) {
    std::string sql;
    for (size_t i = 0; i < stream.columns.size(); ++i) {
      const size_t c = TableOrdinal(stream, i);
      sql += (i ? ", " : "") + MysqlSelectExpression(t.columns[c].name, t.wires[c]);
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
    if (const std::string p = stream.Problem(); !p.empty()) return Status::NotSupported(p);
    FERRY_ASSIGN_OR_RETURN(const Table* t, Find(stream));
    bool matches =
        schema.fields.size() == stream.columns.size() && stream.columns.size() <= t->columns.size();
    for (size_t i = 0; matches && i < stream.columns.size(); ++i) {
      const size_t c = TableOrdinal(stream, i);
      matches = c < t->columns.size() && t->columns[c].name == stream.columns[i].name;
    }
    if (!matches) {
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
  // `keys`: the key's places in the row; `at`: each place's column in the table.
  static std::string RowText(const Table& t, const std::vector<size_t>& at,
                             const std::vector<size_t>& keys, const mysql::RowView& row,
                             int64_t n) {
    if (keys.empty()) return "row " + std::to_string(n) + " of the read";
    std::string out = "the row with ";
    for (size_t k = 0; k < keys.size(); ++k) {
      const auto& v = row[keys[k]];
      const size_t c = at[keys[k]];
      std::string shown = v ? std::string(v->substr(0, 80)) : "NULL";
      if (t.wires[c] == MysqlWire::kBinary && v) shown = "(binary)";
      out += (k ? ", " : "") + QuoteIdent(t.columns[c].name) + " = " + shown;
    }
    return out;
  }

  // Streams the rows of `sql` (SelectList's columns) into batches on `schema` (BatchFull):
  // the server sends them as they are read, so memory stays flat.
  Status StreamRows(const StreamInfo& stream, const Table& t, const std::string& sql,
                    std::shared_ptr<const Schema> schema, size_t batch_rows,
                    const std::function<bool(Batch&)>& emit) {
    // Where the stream's columns are in the table, and its key's among the columns read.
    const size_t n = stream.columns.size();
    std::vector<size_t> at(n);
    for (size_t i = 0; i < n; ++i) at[i] = TableOrdinal(stream, i);
    std::vector<size_t> keys;
    for (const auto& k : stream.primary_key) {
      for (size_t i = 0; i < n; ++i) {
        if (stream.columns[i].name == k) keys.push_back(i);
      }
    }
    Batch batch(std::move(schema));
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
        const auto& tc = t.columns[at[i]];
        Status st = AppendMysqlValue(t.wires[at[i]], row[i], &col);
        if (st.ok() && row[i] && !col.IsValid(col.size() - 1) &&
            batch.schema()->fields[i].required) {
          st = Status::InvalidArgument(
              "the zero date " + std::string(*row[i]) +
              " in a key column, which Iceberg cannot hold; give the row a real date (UPDATE "
              "... SET " +
              QuoteIdent(tc.name) + " = ...) or set the stream's primary_key to other columns");
        }
        if (!st.ok()) {
          return Status::InvalidArgument(
              "table " + t.Display() + ", column " + QuoteIdent(tc.name) + " (" + tc.column_type +
              "), " + RowText(t, at, keys, row, rows) + ": " + st.message() +
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
  // How the server names its binary log files ("binlog" and 6 digits: binlog.000003).
  std::string log_base_;
  size_t log_digits_ = 6;
  // Per table (Display()): columns of the binary log dropped since, whose values are not read.
  std::map<std::string, std::set<std::string>> ignored_;
  std::vector<std::vector<size_t>> stream_keys_;  // per stream of the read: key columns
  bool metadata_checked_ = false;                 // binlog_row_metadata warned about
};

Result<std::string> MysqlSource::Pass::Map(binlog::TableMap map, std::string_view body,
                                           MysqlSource* src) {
  auto f = followed.find({map.database, map.table});
  if (f == followed.end()) {
    maps.erase(map.table_id);
    return std::string();
  }
  const size_t stream = f->second;
  const Table& t = *tables[stream];
  Mapped m;
  m.stream = stream;
  m.to_stream.assign(map.columns.size(), -1);
  const std::string who = t.Display();
  std::set<std::string>& ignored = src->ignored_[who];
  std::set<std::string> unknown;
  if (!map.column_names.empty()) {
    // binlog_row_metadata = FULL: by name.
    for (size_t i = 0; i < map.columns.size() && i < map.column_names.size(); ++i) {
      const std::string& name = map.column_names[i];
      const int c = t.Index(name);
      if (c >= 0) {
        m.to_stream[i] = c;
      } else if (!ignored.count(name) &&
                 std::find(t.ordinal.begin(), t.ordinal.end(), name) == t.ordinal.end()) {
        unknown.insert(name);
      }
    }
  } else if (map.columns.size() > t.ordinal.size()) {
    unknown.insert("#" + std::to_string(map.columns.size()));
  } else {
    // By position: the table's columns in their order, invisible ones included.
    for (size_t i = 0; i < map.columns.size(); ++i) {
      const int c = t.Index(t.ordinal[i]);
      m.to_stream[i] = c;
      if (c >= 0 && map.columns.size() < t.ordinal.size() &&
          !SameLogType(map.columns[i], t.columns[static_cast<size_t>(c)])) {
        return Status::InvalidArgument(
            "table " + who + ": the binary log's rows have " + std::to_string(map.columns.size()) +
            " columns, the table has " + std::to_string(t.ordinal.size()) + " now, and column " +
            std::to_string(i + 1) + " of the log's is not of the type of column " + t.ordinal[i] +
            ": columns were added or changed since these changes were made, and without column "
            "names in the log they cannot be matched. SET GLOBAL binlog_row_metadata = 'FULL' "
            "(for changes from now on); a new backfill loads the table again (drop it in the "
            "destination and remove the stream's entry from the state file)");
      }
    }
  }
  // Columns of another type in the log than discovered (ALTER TABLE ... MODIFY): a rediscovery
  // widens the destination's column; when the log is older than the table (the type changed
  // later), the values convert to the discovered type as they come.
  std::set<std::string> retyped;
  for (size_t i = 0; i < map.columns.size(); ++i) {
    if (m.to_stream[i] < 0) continue;
    const MysqlColumn& c = t.columns[static_cast<size_t>(m.to_stream[i])];
    if (!SameLogType(map.columns[i], c)) retyped.insert(c.name);
  }
  if (!unknown.empty() || !retyped.empty()) {
    // The log's rows differ from the table as discovered: when the discovery is the table as it
    // is now, the log is older (the columns changed since these changes were made); otherwise a
    // rediscovery comes first.
    auto known = current.find(who);
    if (known == current.end()) {
      FERRY_ASSIGN_OR_RETURN(bool now, src->DiscoveredIsCurrent(t));
      known = current.emplace(who, now).first;
    }
    if (!known->second) {
      std::string names;
      for (const auto& u : unknown) names += (names.empty() ? "" : ", ") + u;
      std::string types;
      for (const auto& r : retyped) types += (types.empty() ? "" : ", ") + r;
      return "table " + who + " has " +
             (names.empty() ? ""
                            : "columns in the binary log that its discovery lacks (" + names + ")" +
                                  (types.empty() ? "" : " and ")) +
             (types.empty() ? "" : "columns of another type in the binary log (" + types + ")");
    }
  }
  if (!unknown.empty()) {
    // The columns were dropped since.
    if (map.column_names.empty()) {
      return Status::InvalidArgument(
          "table " + who + ": the binary log's rows have " + std::to_string(map.columns.size()) +
          " columns, more than the table's " + std::to_string(t.ordinal.size()) +
          ": columns were dropped since these changes were made, and without column names in "
          "the log they cannot be matched. SET GLOBAL binlog_row_metadata = 'FULL' (for changes "
          "from now on); a new backfill loads the table again (drop it in the destination and "
          "remove the stream's entry from the state file)");
    }
    FERRY_LOG(kInfo) << "table " << who << ": columns of the binary log dropped since ("
                     << *unknown.begin() << (unknown.size() > 1 ? ", ..." : "") << ") are not read";
    ignored.insert(unknown.begin(), unknown.end());
  }
  for (size_t k : src->stream_keys_[stream]) {
    if (std::find(m.to_stream.begin(), m.to_stream.end(), static_cast<int>(k)) ==
        m.to_stream.end()) {
      return Status::InvalidArgument("table " + who + ": key column " + t.columns[k].name +
                                     " is not in the binary log's rows of it");
    }
  }
  std::vector<binlog::ColumnForm> forms(map.columns.size());
  for (size_t i = 0; i < map.columns.size(); ++i) {
    if (m.to_stream[i] < 0) continue;  // no form: read past
    const auto c = static_cast<size_t>(m.to_stream[i]);
    forms[i].column = t.columns[c];
    forms[i].wire = t.wires[c];
  }
  const uint64_t id = map.table_id;
  auto decoder = binlog::RowDecoder::Make(std::move(map), std::move(forms));
  if (!decoder.ok()) {
    return Status(decoder.status().code(), "table " + who + ": " + decoder.status().message());
  }
  m.decoder = std::move(*decoder);
  // An UPDATE's before image is needed for its key alone (whether the row moved).
  std::vector<bool> key_columns(m.to_stream.size(), false);
  for (size_t i = 0; i < m.to_stream.size(); ++i) {
    const auto& keys = src->stream_keys_[stream];
    key_columns[i] =
        m.to_stream[i] >= 0 &&
        std::find(keys.begin(), keys.end(), static_cast<size_t>(m.to_stream[i])) != keys.end();
  }
  // The other columns' values may come in binary form (numbers, dates and times): no text to
  // print and parse again. A key's bytes stay its text, whatever the log's type.
  std::vector<bool> not_key(key_columns.size());
  for (size_t i = 0; i < key_columns.size(); ++i) {
    not_key[i] = m.to_stream[i] >= 0 && !key_columns[i];
  }
  m.decoder->SetTypedColumns(not_key);
  m.typed.assign(t.columns.size(), false);
  const std::vector<bool> typed = m.decoder->typed();
  for (size_t i = 0; i < m.to_stream.size(); ++i) {
    if (m.to_stream[i] >= 0) m.typed[static_cast<size_t>(m.to_stream[i])] = typed[i];
  }
  m.decoder->SetBeforeColumns(std::move(key_columns));
  m.body = std::string(body);
  maps.insert_or_assign(id, std::move(m));
  return std::string();
}

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
  // The binary log reader's replica id: unique among the server's replicas and other readers;
  // by default one derived from the pipeline's name (two pipelines get two ids).
  uint32_t derived = 2166136261u;
  for (unsigned char c : cfg.pipeline) derived = (derived ^ c) * 16777619u;
  derived = 1000000u + derived % 1000000000u;
  FERRY_ASSIGN_OR_RETURN(int64_t server_id, o.TakeInt("server_id", derived, 1, 4294967295LL));
  s.server_id = static_cast<uint32_t>(server_id);
  std::string truncate = o.TakeOptionalString("truncate").value_or("fail");
  if (truncate != "fail" && truncate != "ignore") {
    return Status::InvalidArgument(o.Where("truncate") + ": truncate is '" + truncate +
                                   "'; it is one of: fail (stop, the default), ignore (keep the "
                                   "destination's rows)");
  }
  s.ignore_truncate = truncate == "ignore";
  FERRY_ASSIGN_OR_RETURN(int64_t heartbeat, o.TakeDuration("heartbeat", 1000, 100));
  s.heartbeat_ms = static_cast<int>(heartbeat);
  std::vector<std::string> known = mysql::ServerKeys();
  for (const char* k : {"databases", "server_id", "truncate", "heartbeat"}) known.push_back(k);
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
