#include "ferry/sink/mysql/mysql_sink.h"

#include <algorithm>
#include <cstdio>
#include <mutex>
#include <optional>
#include <vector>

#include "ferry/base/fault.h"
#include "ferry/base/log.h"
#include "ferry/clients/mysql/mysql_conn.h"
#include "ferry/sink/mysql/mysql_sql.h"
#include "ferry/sink/sink_util.h"
#include "ferry/sink/transactional.h"

namespace ferry::sink {
namespace {

using mysql::ColumnSpec;
using mysql::Connection;
using mysql::Qualified;
using mysql::QuoteIdent;
using mysql::Rows;
using mysql::ServerColumn;

// Rows go to the server in INSERT statements of about this size (fewer round trips, bounded
// memory); smaller when the server's max_allowed_packet is small.
constexpr size_t kStatementBytes = size_t{1} << 20;
constexpr size_t kReadBatchRows = 8192;
// Names of the per-connection staging tables (TEMPORARY, in the state database).
constexpr const char* kUpsertsTable = "ferry_tmp_upserts";
constexpr const char* kDeletesTable = "ferry_tmp_deletes";

struct Settings {
  mysql::ConnectParams connect;
  // Streams' connections: with the state database as the default one (a multi-table DELETE
  // resolves its aliases only when some database is selected).
  mysql::ConnectParams stream_connect;
  std::string database;
  std::string state_database;
  std::string pipeline;
};

// The comment a load table carries from StartLoad on; after the swap it is the target's, which is
// how Publish recognizes a swap that happened before a crash.
std::string LoadComment(const std::string& run) { return "ferry load " + run; }

// The checkpoint row's marker from a query of it.
Result<Json> ParseMarker(const Rows& r, const std::string& what) {
  return ParseCheckpointMarker(
      r.empty() || !r[0][0] ? std::nullopt : std::optional<std::string_view>(*r[0][0]), what);
}

// A table as information_schema describes it; empty when it does not exist.
struct TableDesc {
  std::vector<ServerColumn> columns;
  std::vector<std::string> charset;    // per column: CHARACTER_SET_NAME ("" for none)
  std::vector<std::string> collation;  // per column: COLLATION_NAME
  bool exists() const { return !columns.empty(); }
  const ServerColumn* Find(const std::string& name) const { return FindColumn(columns, name); }
  std::vector<std::string> PrimaryKey() const {
    return PrimaryKeyOf(columns, &ServerColumn::key_position);
  }
};

// information_schema compares names without regard to case on MariaDB: rows are matched again
// here, byte for byte.
Result<TableDesc> DescribeTable(Connection* c, const std::string& db, const std::string& table) {
  FERRY_ASSIGN_OR_RETURN(
      Rows r,
      c->Query("SELECT c.TABLE_NAME, c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE, c.COLUMN_COMMENT, "
               "c.IS_NULLABLE, COALESCE(c.NUMERIC_PRECISION, 0), COALESCE(c.NUMERIC_SCALE, 0), "
               "COALESCE(s.SEQ_IN_INDEX, 0), COALESCE(c.CHARACTER_SET_NAME, ''), "
               "COALESCE(c.COLLATION_NAME, '') "
               "FROM information_schema.COLUMNS c LEFT JOIN information_schema.STATISTICS s "
               "ON s.TABLE_SCHEMA = c.TABLE_SCHEMA AND s.TABLE_NAME = c.TABLE_NAME AND "
               "s.COLUMN_NAME = c.COLUMN_NAME AND s.INDEX_NAME = 'PRIMARY' "
               "WHERE c.TABLE_SCHEMA = " +
                   c->Literal(db) + " AND c.TABLE_NAME = " + c->Literal(table) +
                   " ORDER BY c.ORDINAL_POSITION",
               "describing table " + db + "." + table));
  TableDesc d;
  for (const auto& row : r) {
    if (row[0].value_or("") != table) continue;
    ServerColumn col;
    col.name = row[1].value_or("");
    col.data_type = row[2].value_or("");
    col.column_type = row[3].value_or("");
    col.comment = row[4].value_or("");
    col.nullable = row[5].value_or("YES") == "YES";
    col.precision = std::strtoll(row[6].value_or("0").c_str(), nullptr, 10);
    col.scale = std::strtoll(row[7].value_or("0").c_str(), nullptr, 10);
    col.key_position = static_cast<int>(std::strtol(row[8].value_or("0").c_str(), nullptr, 10));
    d.columns.push_back(std::move(col));
    d.charset.push_back(row[9].value_or(""));
    d.collation.push_back(row[10].value_or(""));
  }
  return d;
}

// The table's comment, or nullopt when the table does not exist.
Result<std::optional<std::string>> TableComment(Connection* c, const std::string& db,
                                                const std::string& table) {
  FERRY_ASSIGN_OR_RETURN(
      Rows r, c->Query("SELECT TABLE_NAME, TABLE_COMMENT FROM information_schema.TABLES WHERE "
                       "TABLE_SCHEMA = " +
                           c->Literal(db) + " AND TABLE_NAME = " + c->Literal(table),
                       "looking up table " + db + "." + table));
  for (const auto& row : r) {
    if (row[0].value_or("") == table) return std::optional<std::string>(row[1].value_or(""));
  }
  return std::optional<std::string>();
}

Result<bool> HasPrimaryKey(Connection* c, const std::string& db, const std::string& table) {
  FERRY_ASSIGN_OR_RETURN(
      Rows r,
      c->Query("SELECT TABLE_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = " +
                   c->Literal(db) + " AND TABLE_NAME = " + c->Literal(table) +
                   " AND INDEX_NAME = 'PRIMARY'",
               "looking up the primary key of " + db + "." + table));
  for (const auto& row : r) {
    if (row[0].value_or("") == table) return true;
  }
  return false;
}

// "`a` INT NOT NULL, ..., PRIMARY KEY (`a`)"
std::string ColumnDefinitions(const Schema& s, const std::vector<ColumnSpec>& specs) {
  std::string sql;
  for (size_t i = 0; i < s.fields.size(); ++i) {
    const Field& f = s.fields[i];
    if (i) sql += ", ";
    sql += mysql::ColumnDefinition(f, specs[i], f.required || IsKey(s, f.id));
  }
  if (!s.identifier_field_ids.empty()) {
    sql += ", PRIMARY KEY (";
    for (size_t k = 0; k < s.identifier_field_ids.size(); ++k) {
      sql += (k ? ", " : "") + QuoteIdent(s.FindById(s.identifier_field_ids[k])->name);
    }
    sql += ")";
  }
  return sql;
}

std::string TableOptions(const mysql::Flavor& f) {
  return " ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=" + f.binary_collation();
}

std::string ColumnList(const Schema& s, const std::vector<size_t>& cols) {
  return sink::ColumnList(s, cols, QuoteIdent);
}

// Checks the names MySQL must take: the table's and its columns'. Column names are compared
// without regard to case by the server.
Status CheckNames(const std::string& stream, const Schema& schema) {
  FERRY_RETURN_IF_ERROR(mysql::CheckIdentifier(stream, "table"));
  std::vector<std::string> seen;
  for (const Field& f : schema.fields) {
    Status s = mysql::CheckIdentifier(f.name, "column");
    if (!s.ok()) return s.WithContext("table " + QuoteIdent(stream));
    const std::string l = Lower(f.name);
    if (std::find(seen.begin(), seen.end(), l) != seen.end()) {
      return Status::InvalidArgument("table " + QuoteIdent(stream) + " has two columns named " +
                                     QuoteIdent(f.name) +
                                     " apart from letter case, and MySQL and MariaDB column names "
                                     "ignore case; rename one of them at the source");
    }
    seen.push_back(l);
  }
  if (schema.fields.empty()) {
    return Status::InvalidArgument("table " + QuoteIdent(stream) + " has no columns");
  }
  return Status::OK();
}

class MysqlStream : public TransactionalStream {
 public:
  MysqlStream(const Settings& s, std::unique_ptr<Connection> conn, std::string stream,
              std::shared_ptr<const Schema> schema, std::vector<ColumnSpec> specs, Json marker)
      : TransactionalStream(s.database + "." + stream, std::move(schema), std::move(marker)),
        s_(s),
        conn_(std::move(conn)),
        stream_(std::move(stream)),
        target_(Qualified(s.database, stream_)),
        specs_(specs),
        encoder_(
            schema_, std::move(specs),
            [this](std::string_view in, std::string* out) { conn_->AppendEscaped(in, out); },
            s.database + "." + stream_) {}
  ~MysqlStream() override { Rollback(); }

  // Sets up the load table of `run` (DDL: outside any transaction). A load whose table was already
  // swapped in (a crash between the swap and the marker) has nothing to set up.
  Status StartLoad(const std::string& run) override {
    if (HasPending()) return Status::Internal("StartLoad with uncommitted rows on " + TableText());
    Rollback();
    FERRY_RETURN_IF_ERROR(Ready());
    SetLoad(run);
    Status st = [&]() -> Status {
      FERRY_ASSIGN_OR_RETURN(auto comment, TableComment(conn_.get(), s_.database, stream_));
      if (comment && *comment == LoadComment(run)) {
        swapped_ = true;
        return Status::OK();
      }
      const std::string loads = Qualified(s_.state_database, "loads");
      const std::string where = " WHERE pipeline = " + conn_->Literal(s_.pipeline) +
                                " AND split = " + conn_->Literal(stream_);
      // Loads of this stream by older runs will never be published: drop them.
      FERRY_ASSIGN_OR_RETURN(Rows old, conn_->Query("SELECT run, load_table FROM " + loads + where +
                                                    " AND run <> " + conn_->Literal(run)));
      for (const auto& row : old) {
        const std::string table = row[1].value_or("");
        if (table.rfind("load_", 0) != 0) continue;
        FERRY_RETURN_IF_ERROR(
            conn_->Exec("DROP TABLE IF EXISTS " + Qualified(s_.state_database, table)));
        FERRY_RETURN_IF_ERROR(conn_->Exec("DROP TABLE IF EXISTS " +
                                          Qualified(s_.state_database, "old_" + table.substr(5))));
        FERRY_RETURN_IF_ERROR(
            conn_->Exec("DELETE FROM " + loads + where + " AND run = " + conn_->Literal(*row[0])));
      }
      // Recorded before the table exists, so that a table is never left untracked.
      FERRY_RETURN_IF_ERROR(conn_->Exec(
          "INSERT INTO " + loads + " (pipeline, split, run, load_table, created_at) VALUES (" +
          conn_->Literal(s_.pipeline) + ", " + conn_->Literal(stream_) + ", " +
          conn_->Literal(run) + ", " + conn_->Literal(load_name_) +
          ", UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE load_table = "
          "VALUES(load_table)"));
      FERRY_ASSIGN_OR_RETURN(TableDesc have,
                             DescribeTable(conn_.get(), s_.state_database, load_name_));
      if (have.exists()) return CheckResumedLoad(have, run);
      // With its primary key from the start: InnoDB keeps rows in key order anyway, and adding
      // the key at Publish would copy the whole table once more.
      return conn_->Exec("CREATE TABLE " + load_ + " (" + ColumnDefinitions(*schema_, specs_) +
                         ")" + TableOptions(conn_->flavor()) +
                         " COMMENT=" + conn_->Literal(LoadComment(run)));
    }();
    if (!st.ok()) return st.WithContext("preparing the load table of " + TableText());
    return Status::OK();
  }

  Status Write(const Batch& batch) override {
    if (load_.empty()) return Status::Internal("Write before StartLoad on " + TableText());
    if (swapped_) {
      return Status::Internal("rows written to the load of " + TableText() +
                              " after its table was swapped in");
    }
    FERRY_RETURN_IF_ERROR(Begin());
    FERRY_RETURN_IF_ERROR(Insert(load_, batch, all_));
    pending_.rows += batch.num_rows();
    return Status::OK();
  }

  Status WriteUpserts(const Batch& batch) override {
    FERRY_RETURN_IF_ERROR(NeedKey());
    FERRY_RETURN_IF_ERROR(EnsureStaging());
    FERRY_RETURN_IF_ERROR(Begin());
    FERRY_RETURN_IF_ERROR(Insert(Qualified(s_.state_database, kUpsertsTable), batch, all_));
    pending_.rows += batch.num_rows();
    pending_.upserts += batch.num_rows();
    return Status::OK();
  }

  Status WriteDeleteKeys(const Batch& batch) override {
    FERRY_RETURN_IF_ERROR(NeedKey());
    FERRY_RETURN_IF_ERROR(EnsureStaging());
    FERRY_RETURN_IF_ERROR(Begin());
    // A key the table cannot hold (too long, out of range) cannot be in it: nothing to delete.
    FERRY_RETURN_IF_ERROR(Insert(Qualified(s_.state_database, kDeletesTable), batch, keys_,
                                 /*skip_unstorable=*/true));
    pending_.deletes += batch.num_rows();
    return Status::OK();
  }

  // Makes the load's rows the table's rows. MySQL commits implicitly at each DDL statement, so
  // the swap (RENAME) and the marker cannot be one transaction; instead:
  //   1. if the marker already shows this publish: done;
  //   2. if the load table exists: make sure it has its primary key, then swap it in with ONE
  //      atomic `RENAME TABLE target TO state.old_x, state.load_x TO target` (just
  //      `RENAME TABLE state.load_x TO target` when there is no target) and drop old_x;
  //      the load table carries the comment 'ferry load <run>' since StartLoad, so from this
  //      moment the target names the run;
  //      if the load table is missing and the target's comment names this run, the swap happened
  //      before a crash: go on; anything else is an error;
  //   3. [sink.before_publish] write the published marker (and forget the load) in one
  //      transaction; a COMMIT of unknown outcome is settled by reading the marker back;
  //   4. [sink.after_publish].
  // A crash between 2 and 3 leaves the new rows visible with the old marker: the sync that
  // follows resumes the load (the marker says all chunks are committed), StartLoad and Publish
  // find the target naming the run, and only the marker is written. Readers see the old rows or
  // the new ones, never a mix (RENAME of several tables is atomic).
  Result<CommitResult> Publish(const std::string& load, const Json& marker,
                               const MarkerCheck& already_landed) override {
    if (HasPending()) {
      return Status::Internal("Publish with uncommitted rows on " + TableText());
    }
    Rollback();
    FERRY_RETURN_IF_ERROR(Ready());
    if (run_ != load) SetLoad(load);
    bool landed_before = false;
    Status st = [&]() -> Status {
      FERRY_ASSIGN_OR_RETURN(Rows r, conn_->Query(MarkerQuery(false)));
      FERRY_ASSIGN_OR_RETURN(Json current, ParseMarker(r, TableText()));
      if (already_landed(current)) {
        landed_before = true;
        return Status::OK();
      }
      FERRY_ASSIGN_OR_RETURN(auto load_comment,
                             TableComment(conn_.get(), s_.state_database, load_name_));
      FERRY_ASSIGN_OR_RETURN(auto target_comment, TableComment(conn_.get(), s_.database, stream_));
      const std::string old = Qualified(s_.state_database, old_name_);
      if (load_comment) {
        if (!keys_.empty()) {
          FERRY_ASSIGN_OR_RETURN(bool has_key,
                                 HasPrimaryKey(conn_.get(), s_.state_database, load_name_));
          if (!has_key) {
            FERRY_RETURN_IF_ERROR(conn_->Exec("ALTER TABLE " + load_ + " ADD PRIMARY KEY (" +
                                              ColumnList(*schema_, keys_) + ")"));
          }
        }
        FERRY_RETURN_IF_ERROR(conn_->Exec("DROP TABLE IF EXISTS " + old));
        Status swapped = target_comment ? conn_->Exec("RENAME TABLE " + target_ + " TO " + old +
                                                      ", " + load_ + " TO " + target_)
                                        : conn_->Exec("RENAME TABLE " + load_ + " TO " + target_);
        if (!swapped.ok()) {
          return swapped.WithContext("a full refresh replaces " + TableText() +
                                     " by renaming the load table in its place (triggers on the "
                                     "table prevent it: drop them, or sync the stream in "
                                     "incremental or cdc mode)");
        }
      } else if (!target_comment || *target_comment != LoadComment(load)) {
        return Status::NotFound(
            "the load table " + s_.state_database + "." + load_name_ + " of run " + load +
            " is missing, and table " + TableText() +
            " is not that run's either (someone dropped it); delete the stream's entry from "
            "the state file and the checkpoint row in " +
            s_.state_database + ".checkpoints to start the full refresh again");
      }
      return conn_->Exec("DROP TABLE IF EXISTS " + old);
    }();
    if (!st.ok()) return st.WithContext("publishing the load of " + TableText());
    if (landed_before) return CommitResult{true};
    FaultPoint("sink.before_publish");
    auto forget_load = [&] {
      return conn_->Exec("DELETE FROM " + Qualified(s_.state_database, "loads") +
                         " WHERE pipeline = " + conn_->Literal(s_.pipeline) +
                         " AND split = " + conn_->Literal(stream_));
    };
    auto r = Transact(marker, already_landed, forget_load, nullptr, "sink.after_publish",
                      "publishing the load of");
    if (r.ok() && !r->already_landed) swapped_ = true;
    return r;
  }

  void DiscardPending() override { Rollback(); }
  // KILL QUERY from a connection of its own: the statement in flight fails (error 1317).
  void Interrupt() override {
    mysql::ConnectParams params;
    unsigned long id = 0;
    {
      std::lock_guard<std::mutex> lock(conn_mu_);
      params = conn_->params();
      id = conn_->thread_id();
    }
    auto killer = Connection::Connect(params);
    Status s = killer.ok() ? (*killer)->Exec("KILL QUERY " + std::to_string(id),
                                             "interrupting a checkpoint")
                           : killer.status();
    if (!s.ok()) {
      FERRY_LOG(kWarn) << TableText() << ": " << s.ToString();
    }
  }

 private:
  std::string TableText() const { return table_text(); }

  Status CheckCommitLoad(const std::string& load) const override {
    if (!load.empty() && pending_.rows > 0 && load != run_) {
      return Status::Internal("rows of load " + run_ + " committed as load " + load + " on " +
                              TableText());
    }
    return Status::OK();
  }

  void SetLoad(const std::string& run) {
    const std::string hex = LoadId({s_.pipeline, stream_, run});
    run_ = run;
    load_name_ = "load_" + hex;
    old_name_ = "old_" + hex;
    load_ = Qualified(s_.state_database, load_name_);
    swapped_ = false;
  }

  // A resumed load's table must have the columns the stream has now: its committed chunks were
  // written for them.
  Status CheckResumedLoad(const TableDesc& have, const std::string& run) {
    bool same = have.columns.size() == schema_->fields.size();
    for (size_t i = 0; same && i < have.columns.size(); ++i) {
      auto t = mysql::TypeOfServerColumn(have.columns[i]);
      same = have.columns[i].name == schema_->fields[i].name && t.ok() &&
             t->ToIceberg() == schema_->fields[i].type.ToIceberg();
    }
    if (same) return Status::OK();
    return Status::InvalidArgument(
        "the load of table " + TableText() + " (run " + run +
        ") was started with other source columns than the stream has now; drop table " +
        s_.state_database + "." + load_name_ +
        ", delete the stream's entry from the state file and its checkpoint row in " +
        s_.state_database + ".checkpoints to start the full refresh again");
  }

  Status NeedKey() const { return RequireKeyToUpsert(!keys_.empty(), TableText()); }

  // A connection that was lost is opened again (staging tables and any transaction went with it).
  Status Ready() {
    if (!conn_->lost()) return Status::OK();
    FERRY_ASSIGN_OR_RETURN(conn_, Connection::Connect(s_.stream_connect));
    in_txn_ = false;
    staged_ = false;
    pending_ = Pending();
    return Status::OK();
  }

  // The staging tables of changes: TEMPORARY (this connection's own; CREATE TEMPORARY TABLE does
  // not commit), InnoDB so that their rows roll back with the transaction.
  Status EnsureStaging() {
    if (staged_) return Status::OK();
    FERRY_RETURN_IF_ERROR(Ready());
    std::string up, del;
    for (size_t i = 0; i < schema_->fields.size(); ++i) {
      const std::string def = mysql::ColumnDefinition(schema_->fields[i], specs_[i], false);
      up += (i ? ", " : "") + def;
      if (std::find(keys_.begin(), keys_.end(), i) != keys_.end()) {
        del += (del.empty() ? "" : ", ") + def;
      }
    }
    const std::string opts = TableOptions(conn_->flavor());
    for (const auto& [name, defs] : {std::pair<const char*, std::string>{kUpsertsTable, up},
                                     std::pair<const char*, std::string>{kDeletesTable, del}}) {
      const std::string table = Qualified(s_.state_database, name);
      Status st = conn_->Exec("DROP TEMPORARY TABLE IF EXISTS " + table);
      if (st.ok()) st = conn_->Exec("CREATE TEMPORARY TABLE " + table + " (" + defs + ")" + opts);
      if (!st.ok()) return st.WithContext("creating the staging tables of " + TableText());
    }
    staged_ = true;
    return Status::OK();
  }

  Status Begin() override {
    if (in_txn_) return Status::OK();
    FERRY_RETURN_IF_ERROR(Ready());
    FERRY_RETURN_IF_ERROR(conn_->Exec("START TRANSACTION", "starting a transaction"));
    in_txn_ = true;
    return Status::OK();
  }

  void RollbackTransaction() override {
    if (in_txn_ && !conn_->lost()) (void)conn_->Exec("ROLLBACK");
    in_txn_ = false;
  }

  // The batch's rows (columns `cols`) into `table`, in multi-row INSERTs of about 1 MiB.
  // `skip_unstorable`: rows with a value the table cannot hold are left out instead of failing.
  Status Insert(const std::string& table, const Batch& batch, const std::vector<size_t>& cols,
                bool skip_unstorable = false) {
    if (batch.num_rows() == 0) return Status::OK();
    const std::string head =
        "INSERT INTO " + table + " (" + ColumnList(*schema_, cols) + ") VALUES ";
    const size_t limit = std::max<size_t>(
        4096,
        std::min<size_t>(kStatementBytes, static_cast<size_t>(conn_->max_allowed_packet()) / 2));
    auto send = [&]() -> Status {
      pending_.bytes += buf_.size();
      Status s = conn_->Exec(buf_);
      if (!s.ok()) {
        Rollback();
        return s.WithContext("writing rows to " + TableText());
      }
      return Status::OK();
    };
    buf_ = head;
    size_t in_buf = 0;
    for (size_t r = 0; r < batch.num_rows(); ++r) {
      row_.clear();
      Status s = encoder_.AppendRow(batch, r, cols, &row_);
      if (!s.ok() && skip_unstorable && s.code() == StatusCode::kInvalidArgument) continue;
      if (!s.ok()) {
        Rollback();
        return s;
      }
      if (in_buf > 0 && buf_.size() + 1 + row_.size() > limit) {
        FERRY_RETURN_IF_ERROR(send());
        buf_ = head;
        in_buf = 0;
      }
      if (in_buf > 0) buf_ += ',';
      buf_ += row_;
      ++in_buf;
    }
    if (in_buf > 0) FERRY_RETURN_IF_ERROR(send());
    if (buf_.capacity() > 4 * kStatementBytes) std::string().swap(buf_);
    return Status::OK();
  }

  std::string MarkerQuery(bool lock) {
    return "SELECT marker FROM " + Qualified(s_.state_database, "checkpoints") +
           " WHERE pipeline = " + conn_->Literal(s_.pipeline) +
           " AND split = " + conn_->Literal(stream_) + (lock ? " FOR UPDATE" : "");
  }

  // The checkpoint row, locked until the transaction ends (a second writer of the same pipeline
  // and table waits, then sees this commit's marker).
  Result<Json> LockedMarker() override {
    FERRY_ASSIGN_OR_RETURN(Rows r, conn_->Query(MarkerQuery(true), "reading the checkpoint row"));
    return ParseMarker(r, TableText());
  }

  Status SetMarker(const Json& marker) override {
    std::string text;
    try {
      text = marker.dump(-1, ' ', false, Json::error_handler_t::strict);
    } catch (const Json::exception& e) {
      return Status::Internal(std::string("the marker cannot be written as JSON: ") + e.what());
    }
    return conn_->Exec("INSERT INTO " + Qualified(s_.state_database, "checkpoints") +
                           " (pipeline, split, marker, updated_at) VALUES (" +
                           conn_->Literal(s_.pipeline) + ", " + conn_->Literal(stream_) + ", " +
                           conn_->Literal(text) +
                           ", UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE marker = VALUES(marker), "
                           "updated_at = VALUES(updated_at)",
                       "writing the checkpoint row");
  }

  // The staged changes, set-based: one DELETE ... JOIN and one INSERT ... ON DUPLICATE KEY UPDATE
  // for the whole commit; then the staging tables are emptied in the same transaction.
  Status ApplyChanges() override {
    const std::string ups = Qualified(s_.state_database, kUpsertsTable);
    const std::string dels = Qualified(s_.state_database, kDeletesTable);
    if (pending_.deletes > 0) {
      std::string on;
      for (size_t k : keys_) {
        if (!on.empty()) on += " AND ";
        const std::string c = QuoteIdent(schema_->fields[k].name);
        on += "t." + c + " = d." + c;
      }
      FERRY_RETURN_IF_ERROR(
          conn_->Exec("DELETE t FROM " + target_ + " AS t JOIN " + dels + " AS d ON " + on,
                      "deleting rows by key"));
      FERRY_RETURN_IF_ERROR(conn_->Exec("DELETE FROM " + dels));
    }
    if (pending_.upserts > 0) {
      std::string set;
      for (size_t i : all_) {
        if (std::find(keys_.begin(), keys_.end(), i) != keys_.end()) continue;
        const std::string c = QuoteIdent(schema_->fields[i].name);
        set += (set.empty() ? "" : ", ") + c + " = VALUES(" + c + ")";
      }
      if (set.empty()) {  // key columns only: a row that exists stays as it is
        const std::string c = QuoteIdent(schema_->fields[keys_[0]].name);
        set = c + " = " + c;
      }
      FERRY_RETURN_IF_ERROR(conn_->Exec(
          "INSERT INTO " + target_ + " (" + ColumnList(*schema_, all_) + ") SELECT " +
              ColumnList(*schema_, all_) + " FROM " + ups + " ON DUPLICATE KEY UPDATE " + set,
          "upserting rows"));
      FERRY_RETURN_IF_ERROR(conn_->Exec("DELETE FROM " + ups));
    }
    return Status::OK();
  }

  Status SendCommit(bool cut) override {
    Status s = cut ? conn_->SendAndCut("COMMIT") : conn_->Exec("COMMIT");
    in_txn_ = false;
    return s;
  }
  bool OutcomeUnknown(const Status&) const override { return conn_->lost(); }
  Status Reconnect() override {
    FERRY_ASSIGN_OR_RETURN(auto fresh, Connection::Connect(s_.stream_connect));
    {
      std::lock_guard<std::mutex> lock(conn_mu_);
      conn_ = std::move(fresh);
    }
    staged_ = false;
    return Status::OK();
  }
  Result<Json> ReadMarker() override {
    FERRY_ASSIGN_OR_RETURN(Rows r, conn_->Query(MarkerQuery(false), "reading the checkpoint row"));
    return ParseMarker(r, TableText());
  }

  Settings s_;
  std::mutex conn_mu_;  // guards replacing conn_, for Interrupt
  std::unique_ptr<Connection> conn_;
  std::string stream_;
  std::string target_;  // quoted, qualified
  std::vector<ColumnSpec> specs_;
  mysql::RowEncoder encoder_;
  std::string run_;        // the load's run, set by StartLoad or Publish
  std::string load_name_;  // load_<hex>
  std::string old_name_;   // old_<hex>: the replaced table, between RENAME and DROP
  std::string load_;       // quoted, qualified
  bool swapped_ = false;   // the load's table is the target already
  bool in_txn_ = false;
  bool staged_ = false;
  std::string buf_;
  std::string row_;
};

// Rows of a table read back (streamed, text protocol), for `ferry verify`.
class MysqlReader : public TableReader {
 public:
  MysqlReader(std::unique_ptr<Connection> conn, std::string table, std::string table_text,
              std::shared_ptr<const Schema> schema, std::vector<std::string> exprs)
      : conn_(std::move(conn)),
        table_(std::move(table)),
        table_text_(std::move(table_text)),
        schema_(std::move(schema)),
        exprs_(std::move(exprs)) {}
  const std::shared_ptr<const Schema>& schema() const override { return schema_; }
  std::string Version() const override { return ""; }

  Status Read(const std::function<Status(const Batch&)>& each) override {
    std::string sql = "SELECT ";
    for (size_t i = 0; i < exprs_.size(); ++i) sql += (i ? ", " : "") + exprs_[i];
    sql += " FROM " + table_;
    Batch batch(schema_);
    Status st = conn_->Stream(
        sql,
        [&](const mysql::RowView& row) -> Status {
          for (size_t c = 0; c < row.size(); ++c) {
            if (!row[c]) {
              batch.column(c).AppendNull();
              continue;
            }
            Status s = mysql::AppendServerText(*row[c], &batch.column(c));
            if (!s.ok()) {
              return Status::InvalidArgument("column " + QuoteIdent(schema_->fields[c].name) +
                                             " holds a value ferry cannot read as " +
                                             schema_->fields[c].type.ToIceberg() + ": " +
                                             s.message());
            }
          }
          if (batch.num_rows() >= kReadBatchRows) {
            FERRY_RETURN_IF_ERROR(each(batch));
            batch.Clear();
          }
          return Status::OK();
        },
        "reading table " + table_text_);
    if (!st.ok()) return st.WithContext("reading table " + table_text_);
    if (batch.num_rows() > 0) FERRY_RETURN_IF_ERROR(each(batch));
    return Status::OK();
  }

 private:
  std::unique_ptr<Connection> conn_;
  std::string table_;
  std::string table_text_;
  std::shared_ptr<const Schema> schema_;
  std::vector<std::string> exprs_;
};

class MysqlSink : public Sink {
 public:
  MysqlSink(Settings s, std::unique_ptr<Connection> conn)
      : s_(std::move(s)), conn_(std::move(conn)) {}

  // Creates the databases (when missing) and ferry's tables.
  Status Prepare() {
    for (const std::string& db : {s_.state_database, s_.database}) {
      FERRY_ASSIGN_OR_RETURN(Rows r, conn_->Query("SELECT SCHEMA_NAME FROM information_schema."
                                                  "SCHEMATA WHERE SCHEMA_NAME = " +
                                                  conn_->Literal(db)));
      bool found = false;
      for (const auto& row : r) found |= row[0].value_or("") == db;
      if (found) continue;
      Status st =
          conn_->Exec("CREATE DATABASE IF NOT EXISTS " + QuoteIdent(db) + " CHARACTER SET utf8mb4");
      if (!st.ok()) {
        if (st.code() != StatusCode::kPermissionDenied) return st;
        return Status::PermissionDenied(
            "database " + QuoteIdent(db) + " does not exist (or user '" + conn_->user() +
            "' cannot see it), and the user may not create it: " + conn_->last_error() +
            "; create it (CREATE DATABASE " + QuoteIdent(db) +
            " CHARACTER SET utf8mb4) and GRANT ALL PRIVILEGES ON " + QuoteIdent(db) + ".* TO '" +
            conn_->user() + "'");
      }
    }
    const std::string keytext =
        "VARCHAR(255) CHARACTER SET utf8mb4 COLLATE " + conn_->flavor().binary_collation();
    Status st =
        conn_->Exec("CREATE TABLE IF NOT EXISTS " + Qualified(s_.state_database, "checkpoints") +
                    " (pipeline " + keytext + " NOT NULL, split " + keytext +
                    " NOT NULL, marker LONGTEXT NOT NULL, updated_at DATETIME(6) NOT NULL, "
                    "PRIMARY KEY (pipeline, split))" +
                    TableOptions(conn_->flavor()));
    if (st.ok()) {
      st = conn_->Exec("CREATE TABLE IF NOT EXISTS " + Qualified(s_.state_database, "loads") +
                       " (pipeline " + keytext + " NOT NULL, split " + keytext + " NOT NULL, run " +
                       keytext +
                       " NOT NULL, load_table VARCHAR(64) NOT NULL, created_at DATETIME(6) NOT "
                       "NULL, PRIMARY KEY (pipeline, split, run))" +
                       TableOptions(conn_->flavor()));
    }
    if (!st.ok()) {
      return st.WithContext("creating ferry's checkpoint tables in database " + s_.state_database);
    }
    return Status::OK();
  }

  std::string Describe() const override {
    return conn_->ServerName() + " at " + conn_->Where() + ", database " + s_.database +
           " (checkpoints in " + s_.state_database + ")";
  }
  std::string Guarantee() const override {
    return "exactly-once (rows and checkpoint row in one MySQL/MariaDB transaction; a full "
           "refresh's table swap is a RENAME settled by the table's comment)";
  }
  std::string TableName(const std::string& stream) const override {
    return s_.database + "." + stream;
  }

  Result<std::unique_ptr<SinkStream>> OpenStream(const std::string& stream,
                                                 const Schema& source_schema,
                                                 bool replacing) override {
    FERRY_RETURN_IF_ERROR(CheckNames(stream, source_schema));
    FERRY_ASSIGN_OR_RETURN(auto conn, Connection::Connect(s_.stream_connect));
    auto specs = mysql::ColumnSpecs(source_schema, conn->flavor());
    if (!specs.ok()) return specs.status().WithContext("table " + TableName(stream));
    FERRY_ASSIGN_OR_RETURN(TableDesc desc, DescribeTable(conn.get(), s_.database, stream));
    if (!desc.exists()) {
      Status st =
          conn->Exec("CREATE TABLE IF NOT EXISTS " + Qualified(s_.database, stream) + " (" +
                     ColumnDefinitions(source_schema, *specs) + ")" + TableOptions(conn->flavor()));
      if (!st.ok()) return st.WithContext("creating table " + TableName(stream));
    } else if (!replacing) {
      FERRY_RETURN_IF_ERROR(Evolve(conn.get(), stream, desc, source_schema, *specs));
    }
    // The checkpoint row exists before any commit locks it: SELECT ... FOR UPDATE of a missing
    // row would lock the gap instead, and two streams inserting their first rows into that gap
    // at once would deadlock. A marker of JSON null reads as no marker.
    Status st =
        conn->Exec("INSERT INTO " + Qualified(s_.state_database, "checkpoints") +
                   " (pipeline, split, marker, updated_at) VALUES (" + conn->Literal(s_.pipeline) +
                   ", " + conn->Literal(stream) +
                   ", 'null', UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE pipeline = pipeline");
    if (!st.ok()) return st.WithContext("creating the checkpoint row of " + TableName(stream));
    FERRY_ASSIGN_OR_RETURN(Json marker, ReadMarkerOn(conn.get(), stream));
    auto schema = std::make_shared<const Schema>(source_schema);
    return std::unique_ptr<SinkStream>(new MysqlStream(
        s_, std::move(conn), stream, std::move(schema), std::move(*specs), std::move(marker)));
  }

  Result<Json> ReadMarker(const std::string& stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (conn_->lost()) {
      FERRY_ASSIGN_OR_RETURN(conn_, Connection::Connect(s_.stream_connect));
    }
    FERRY_ASSIGN_OR_RETURN(auto comment, TableComment(conn_.get(), s_.database, stream));
    if (!comment) return Json(nullptr);
    return ReadMarkerOn(conn_.get(), stream);
  }

  Result<std::unique_ptr<TableReader>> OpenReader(const std::string& stream) override {
    FERRY_ASSIGN_OR_RETURN(auto conn, Connection::Connect(s_.stream_connect));
    FERRY_ASSIGN_OR_RETURN(TableDesc desc, DescribeTable(conn.get(), s_.database, stream));
    if (!desc.exists()) return std::unique_ptr<TableReader>();
    auto schema = std::make_shared<Schema>();
    std::vector<std::string> exprs;
    std::vector<std::pair<int, int32_t>> key;
    for (const auto& c : desc.columns) {
      auto t = mysql::TypeOfServerColumn(c);
      if (!t.ok()) return t.status().WithContext("table " + TableName(stream));
      Field f;
      f.id = static_cast<int32_t>(schema->fields.size()) + 1;
      f.name = c.name;
      f.type = *t;
      f.required = !c.nullable;
      if (c.key_position > 0) key.emplace_back(c.key_position, f.id);
      exprs.push_back(mysql::ReadExpression(c, f.type));
      schema->fields.push_back(std::move(f));
    }
    int32_t next_id = static_cast<int32_t>(schema->fields.size());
    for (Field& f : schema->fields) {
      if (f.type.is_list()) f.type = f.type.WithElementId(++next_id);
    }
    SetKeyInOrder(std::move(key), schema.get());
    return std::unique_ptr<TableReader>(
        new MysqlReader(std::move(conn), Qualified(s_.database, stream), TableName(stream),
                        std::move(schema), std::move(exprs)));
  }

 private:
  Result<Json> ReadMarkerOn(Connection* conn, const std::string& stream) {
    FERRY_ASSIGN_OR_RETURN(
        Rows r, conn->Query("SELECT marker FROM " + Qualified(s_.state_database, "checkpoints") +
                                " WHERE pipeline = " + conn->Literal(s_.pipeline) +
                                " AND split = " + conn->Literal(stream),
                            "reading the checkpoint row of " + TableName(stream)));
    return ParseMarker(r, TableName(stream));
  }

  // Brings an existing table to the source's columns: added columns and widened types are
  // applied, NOT NULL is dropped where the source's column may be NULL or is gone; anything else
  // would lose data or break the key, and stops with the fix.
  Status Evolve(Connection* conn, const std::string& stream, const TableDesc& desc,
                const Schema& source, const std::vector<ColumnSpec>& specs) {
    FERRY_RETURN_IF_ERROR(CheckSameKey(desc.PrimaryKey(), source, TableName(stream)));
    // A column's definition as it is, without NOT NULL.
    auto relaxed = [&](size_t i) {
      const ServerColumn& c = desc.columns[i];
      std::string def = QuoteIdent(c.name) + " " + c.column_type;
      if (!desc.collation[i].empty()) {
        def += " CHARACTER SET " + desc.charset[i] + " COLLATE " + desc.collation[i];
      }
      def += " NULL";
      if (!c.comment.empty()) def += " COMMENT " + conn->Literal(c.comment);
      return def;
    };
    std::vector<std::string> alters;
    for (size_t i = 0; i < source.fields.size(); ++i) {
      const Field& f = source.fields[i];
      const bool key = IsKey(source, f.id);
      const ServerColumn* c = desc.Find(f.name);
      if (c == nullptr) {
        for (const auto& x : desc.columns) {
          if (Lower(x.name) == Lower(f.name)) {
            return Status::InvalidArgument(
                "source column " + QuoteIdent(f.name) + " of table " + TableName(stream) +
                " differs from column " + QuoteIdent(x.name) +
                " only in letter case, and MySQL and MariaDB column names ignore case; rename "
                "one of them, or run a full refresh of the stream, which recreates the table");
          }
        }
        alters.push_back("ADD COLUMN " + mysql::ColumnDefinition(f, specs[i], false));
        continue;
      }
      const size_t at = static_cast<size_t>(c - desc.columns.data());
      auto have = mysql::TypeOfServerColumn(*c);
      const TypeChange fit = mysql::CompareColumnType(*c, f.type);
      if (fit == TypeChange::kRefused) {
        return Status::InvalidArgument(
            "column " + QuoteIdent(f.name) + " of " + TableName(stream) + " is " + c->column_type +
            (have.ok() ? " (" + have->ToIceberg() + ")" : "") + " but the source now has " +
            f.type.ToIceberg() + " (" + specs[i].type +
            "); ferry applies only widening changes in place (int to long, float to double, a "
            "decimal's precision): run a full refresh of the stream, which recreates the table, "
            "or change the column yourself (ALTER TABLE ... MODIFY COLUMN)");
      }
      if (fit == TypeChange::kWiden) {
        const bool not_null = !c->nullable && (key || f.required);
        alters.push_back("MODIFY COLUMN " + mysql::ColumnDefinition(f, specs[i], not_null));
      } else if (!c->nullable && !key && !f.required) {
        alters.push_back("MODIFY COLUMN " + relaxed(at));
      }
    }
    for (size_t i = 0; i < desc.columns.size(); ++i) {
      const ServerColumn& c = desc.columns[i];
      if (!c.nullable && c.key_position == 0 && source.FindByName(c.name) == nullptr) {
        alters.push_back("MODIFY COLUMN " + relaxed(i));  // the source no longer has it
      }
    }
    if (alters.empty()) return Status::OK();
    const std::string sql = AlterTableSql(Qualified(s_.database, stream), alters);
    FERRY_LOG(kInfo) << TableName(stream) << ": schema change applied: " << sql;
    Status st = conn->Exec(sql);
    if (!st.ok()) return st.WithContext("changing the columns of " + TableName(stream));
    return Status::OK();
  }

  Settings s_;
  std::mutex mu_;  // guards conn_ (ReadMarker)
  std::unique_ptr<Connection> conn_;
};

}  // namespace

Result<std::unique_ptr<Sink>> OpenMysqlSink(config::DestinationConfig& cfg,
                                            const std::string& pipeline) {
  config::Options& o = cfg.options;
  Settings s;
  s.pipeline = pipeline;
  FERRY_ASSIGN_OR_RETURN(mysql::Url u, mysql::TakeServerKeys(o, "destination"));
  s.state_database = o.TakeOptionalString("state_database").value_or("ferry_state");
  std::vector<std::string> known = mysql::ServerKeys();
  known.push_back("state_database");
  FERRY_RETURN_IF_ERROR(o.CheckAllUsed(known));
  s.connect.host = u.host;
  s.connect.port = u.port;
  s.connect.user = u.user;
  s.connect.password = u.password;
  s.database = u.database;
  if (s.database.empty()) {
    return Status::InvalidArgument(
        "destination: database is missing (the database the tables go to; created when "
        "missing)");
  }
  FERRY_RETURN_IF_ERROR(mysql::CheckIdentifier(s.database, "database"));
  FERRY_RETURN_IF_ERROR(mysql::CheckIdentifier(s.state_database, "database"));
  if (s.database == s.state_database) {
    return Status::InvalidArgument(
        "destination.database and destination.state_database are both '" + s.database +
        "'; give ferry's checkpoint tables their own database");
  }
  s.stream_connect = s.connect;
  s.stream_connect.database = s.state_database;
  FERRY_ASSIGN_OR_RETURN(auto conn, mysql::Connection::Connect(s.connect));
  auto sink = std::make_unique<MysqlSink>(s, std::move(conn));
  FERRY_RETURN_IF_ERROR(sink->Prepare());
  return std::unique_ptr<Sink>(std::move(sink));
}

}  // namespace ferry::sink
