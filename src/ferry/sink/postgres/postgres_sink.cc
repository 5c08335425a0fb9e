#include "ferry/sink/postgres/postgres_sink.h"

#include <cstdio>
#include <mutex>
#include <vector>

#include "ferry/base/fault.h"
#include "ferry/base/log.h"
#include "ferry/clients/postgres/copy_binary.h"
#include "ferry/clients/postgres/pg_conn.h"
#include "ferry/clients/postgres/pg_types.h"
#include "ferry/sink/postgres/copy_encoder.h"
#include "ferry/sink/postgres/pg_evolve.h"
#include "ferry/sink/sink_util.h"
#include "ferry/sink/transactional.h"

namespace ferry::sink {
namespace {

using ferry::pg::PgConnection;
using ferry::pg::PgResult;
using ferry::pg::QuoteIdent;

struct Settings {
  std::string dsn;
  std::string schema;
  std::string state_schema;
  std::string pipeline;
};

// A column of an existing table, as the catalog describes it.
struct TableColumn {
  std::string name;
  ferry::pg::PgBaseType type;
  bool not_null = false;
  int pk_position = 0;
};

struct TableDesc {
  bool exists = false;
  std::vector<TableColumn> columns;
  const TableColumn* Find(const std::string& name) const { return FindColumn(columns, name); }
  std::vector<std::string> PrimaryKey() const {
    return PrimaryKeyOf(columns, &TableColumn::pk_position);
  }
};

std::string Qualified(const std::string& schema, const std::string& table) {
  return QuoteIdent(schema) + "." + QuoteIdent(table);
}

Result<TableDesc> DescribeTable(PgConnection* conn, const std::string& qualified) {
  TableDesc d;
  FERRY_ASSIGN_OR_RETURN(
      PgResult r,
      conn->Query(
          "SELECT a.attname, a.atttypid, a.atttypmod, t.typtype, t.typcategory, "
          "format_type(a.atttypid, a.atttypmod), a.attnotnull, COALESCE(et.oid, 0), "
          "COALESCE(et.typtype, 'b'), COALESCE(et.typcategory, 'U'), "
          // int2vector subscripts start at 0
          "COALESCE((SELECT array_position(i.indkey::int2[], a.attnum) + 1 - "
          "                 array_lower(i.indkey::int2[], 1) FROM pg_index i "
          "          WHERE i.indrelid = a.attrelid AND i.indisprimary), 0), "
          "to_regclass($1) IS NOT NULL "
          "FROM (SELECT to_regclass($1) AS rel) x "
          "LEFT JOIN pg_attribute a ON a.attrelid = x.rel AND a.attnum > 0 AND NOT a.attisdropped "
          "LEFT JOIN pg_type t ON t.oid = a.atttypid "
          "LEFT JOIN pg_type et ON et.oid = t.typelem AND t.typcategory = 'A' "
          "ORDER BY a.attnum",
          {qualified}));
  for (int i = 0; i < r.rows(); ++i) {
    d.exists = r.Bool(i, 11);
    if (r.IsNull(i, 0)) continue;
    TableColumn c;
    c.name = r.Text(i, 0);
    c.type.oid = static_cast<uint32_t>(r.Int64(i, 1));
    c.type.typmod = static_cast<int32_t>(r.Int64(i, 2));
    c.type.typtype = r.Text(i, 3)[0];
    c.type.typcategory = r.Text(i, 4)[0];
    c.type.display = r.Text(i, 5);
    c.not_null = r.Bool(i, 6);
    if (c.type.typcategory == 'A' && r.Int64(i, 7) != 0) {
      auto e = std::make_shared<ferry::pg::PgBaseType>();
      e->oid = static_cast<uint32_t>(r.Int64(i, 7));
      e->typtype = r.Text(i, 8)[0];
      e->typcategory = r.Text(i, 9)[0];
      e->typmod = c.type.typmod;
      e->display = c.type.display;
      c.type.element = std::move(e);
    }
    c.pk_position = static_cast<int>(r.Int64(i, 10));
    d.columns.push_back(std::move(c));
  }
  return d;
}

// "a" bigint NOT NULL, ..., PRIMARY KEY ("a")
std::string ColumnDefinitions(const Schema& s, bool with_key) {
  std::string sql;
  for (const Field& f : s.fields) {
    if (!sql.empty()) sql += ", ";
    sql += QuoteIdent(f.name) + " " + pg::PgTypeName(f.type);
    if (f.required) sql += " NOT NULL";
  }
  if (with_key && !s.identifier_field_ids.empty()) {
    sql += ", PRIMARY KEY (";
    bool first = true;
    for (int32_t id : s.identifier_field_ids) {
      if (!first) sql += ", ";
      first = false;
      sql += QuoteIdent(s.FindById(id)->name);
    }
    sql += ")";
  }
  return sql;
}

std::string ColumnList(const Schema& s, const std::vector<size_t>& cols) {
  return sink::ColumnList(s, cols, QuoteIdent);
}

// The checkpoint row's marker from a query of marker::text.
Result<Json> ParseMarker(const PgResult& r, const std::string& what) {
  return ParseCheckpointMarker(r.rows() == 0 || r.IsNull(0, 0)
                                   ? std::nullopt
                                   : std::optional<std::string_view>(r.Text(0, 0)),
                               what);
}

class PostgresSink;

class PostgresStream : public TransactionalStream {
 public:
  PostgresStream(const Settings& s, std::unique_ptr<PgConnection> conn, std::string stream,
                 std::shared_ptr<const Schema> schema, Json marker)
      : TransactionalStream(s.schema + "." + stream, std::move(schema), std::move(marker)),
        s_(s),
        conn_(std::move(conn)),
        stream_(std::move(stream)),
        target_(Qualified(s.schema, stream_)) {}
  ~PostgresStream() override { DiscardPending(); }

  Status StartLoad(const std::string& run) override {
    load_name_ = "load_" + LoadId({s_.pipeline, stream_, run});
    load_ = Qualified(s_.state_schema, load_name_);
    const std::string loads = Qualified(s_.state_schema, "loads");
    FERRY_RETURN_IF_ERROR(conn_->Exec("BEGIN"));
    Status st = [&]() -> Status {
      // Loads of this stream by older runs will never be published: drop them.
      FERRY_ASSIGN_OR_RETURN(
          PgResult old,
          conn_->Query("DELETE FROM " + loads +
                           " WHERE pipeline = $1 AND split = $2 AND run <> $3 RETURNING load_table",
                       {s_.pipeline, stream_, run}));
      for (int i = 0; i < old.rows(); ++i) {
        FERRY_RETURN_IF_ERROR(
            conn_->Exec("DROP TABLE IF EXISTS " + Qualified(s_.state_schema, old.Text(i, 0))));
      }
      FERRY_RETURN_IF_ERROR(conn_->Exec("CREATE TABLE IF NOT EXISTS " + load_ + " (" +
                                        ColumnDefinitions(*schema_, false) + ")"));
      FERRY_RETURN_IF_ERROR(
          conn_
              ->Query("INSERT INTO " + loads +
                          " (pipeline, split, run, load_table) VALUES ($1, $2, $3, $4) "
                          "ON CONFLICT DO NOTHING",
                      {s_.pipeline, stream_, run, load_name_})
              .status());
      return conn_->Exec("COMMIT");
    }();
    if (!st.ok()) {
      (void)conn_->Exec("ROLLBACK");
      return st.WithContext("preparing the load table of " + TableText());
    }
    return Status::OK();
  }

  Status Write(const Batch& batch) override {
    if (load_.empty()) return Status::Internal("Write before StartLoad on " + TableText());
    FERRY_RETURN_IF_ERROR(Begin(false));
    FERRY_RETURN_IF_ERROR(Copy(load_, batch, all_));
    pending_.rows += batch.num_rows();
    return Status::OK();
  }

  Status WriteUpserts(const Batch& batch) override {
    FERRY_RETURN_IF_ERROR(NeedKey());
    FERRY_RETURN_IF_ERROR(Begin(true));
    FERRY_RETURN_IF_ERROR(Copy("pg_temp.ferry_upserts", batch, all_));
    pending_.rows += batch.num_rows();
    pending_.upserts += batch.num_rows();
    return Status::OK();
  }

  Status WriteDeleteKeys(const Batch& batch) override {
    FERRY_RETURN_IF_ERROR(NeedKey());
    FERRY_RETURN_IF_ERROR(Begin(true));
    FERRY_RETURN_IF_ERROR(Copy("pg_temp.ferry_deletes", batch, keys_));
    pending_.deletes += batch.num_rows();
    return Status::OK();
  }

  Result<CommitResult> Publish(const std::string& load, const Json& marker,
                               const MarkerCheck& already_landed) override {
    if (load_.empty()) FERRY_RETURN_IF_ERROR(StartLoad(load));
    return Transact(
        marker, already_landed, [&] { return SwapInLoad(); }, "sink.before_publish",
        "sink.after_publish", "publishing the load of");
  }

  void DiscardPending() override { Rollback(); }
  void Interrupt() override {
    std::lock_guard<std::mutex> lock(conn_mu_);
    conn_->Cancel();
  }

 private:
  std::string TableText() const { return table_text(); }

  // Inside Publish's transaction: the load table, with its primary key, in place of the target.
  Status SwapInLoad() {
    if (!keys_.empty()) {
      FERRY_RETURN_IF_ERROR(conn_->Exec("ALTER TABLE " + load_ + " ADD PRIMARY KEY (" +
                                        ColumnList(*schema_, keys_) + ")"));
    }
    Status dropped = conn_->Exec("DROP TABLE IF EXISTS " + target_);
    if (!dropped.ok()) {
      return dropped.WithContext(
          "a full refresh replaces " + TableText() +
          ", and other objects (views, foreign keys) depend on it; drop them or sync the stream "
          "in incremental or cdc mode");
    }
    FERRY_RETURN_IF_ERROR(
        conn_->Exec("ALTER TABLE " + load_ + " SET SCHEMA " + QuoteIdent(s_.schema)));
    FERRY_RETURN_IF_ERROR(conn_->Exec("ALTER TABLE " + Qualified(s_.schema, load_name_) +
                                      " RENAME TO " + QuoteIdent(stream_)));
    return conn_
        ->Query("DELETE FROM " + Qualified(s_.state_schema, "loads") +
                    " WHERE pipeline = $1 AND split = $2",
                {s_.pipeline, stream_})
        .status();
  }

  Status NeedKey() const { return RequireKeyToUpsert(!keys_.empty(), TableText()); }

  // Opens the commit's transaction. `staging`: changes go through temporary tables first, created
  // once per connection (their rows vanish at each COMMIT or ROLLBACK).
  Status Begin() override { return Begin(false); }
  Status Begin(bool staging) {
    if (staging && !staged_) {
      FERRY_RETURN_IF_ERROR(conn_->Exec("CREATE TEMP TABLE IF NOT EXISTS ferry_upserts (" +
                                        ColumnDefinitions(*schema_, false) +
                                        ") ON COMMIT DELETE ROWS"));
      Schema key_schema;
      for (size_t k : keys_) key_schema.fields.push_back(schema_->fields[k]);
      FERRY_RETURN_IF_ERROR(conn_->Exec("CREATE TEMP TABLE IF NOT EXISTS ferry_deletes (" +
                                        ColumnDefinitions(key_schema, false) +
                                        ") ON COMMIT DELETE ROWS"));
      staged_ = true;
    }
    if (in_txn_) return Status::OK();
    Status begun = conn_->Exec("BEGIN");
    if (!begun.ok()) return begun.WithContext("destination table " + TableText());
    in_txn_ = true;
    return Status::OK();
  }

  void RollbackTransaction() override {
    if (in_txn_) (void)conn_->Exec("ROLLBACK");
    in_txn_ = false;
  }

  Status Copy(const std::string& table, const Batch& batch, const std::vector<size_t>& cols) {
    buf_.clear();
    pg::AppendCopyHeader(&buf_);
    Status s = pg::AppendCopyRows(batch, cols, &buf_);
    if (!s.ok()) return s.WithContext(TableText());
    pg::AppendCopyTrailer(&buf_);
    pending_.bytes += buf_.size();
    s = conn_->CopyIn(
        "COPY " + table + " (" + ColumnList(*schema_, cols) + ") FROM STDIN (FORMAT binary)", buf_);
    if (!s.ok()) {
      Rollback();
      return s.WithContext("writing rows to " + TableText());
    }
    return Status::OK();
  }

  // The checkpoint row, locked until the transaction ends (a second writer of the same
  // pipeline and table waits, then sees this commit's marker).
  Result<Json> LockedMarker() override {
    FERRY_ASSIGN_OR_RETURN(PgResult r, conn_->Query("SELECT marker::text FROM " +
                                                        Qualified(s_.state_schema, "checkpoints") +
                                                        " WHERE pipeline = $1 AND split = $2 "
                                                        "FOR UPDATE",
                                                    {s_.pipeline, stream_}));
    return ParseMarker(r, TableText());
  }

  Status SetMarker(const Json& marker) override {
    return conn_
        ->Query("INSERT INTO " + Qualified(s_.state_schema, "checkpoints") +
                    " (pipeline, split, marker, updated_at) VALUES ($1, $2, $3::jsonb, now()) "
                    "ON CONFLICT (pipeline, split) DO UPDATE SET marker = EXCLUDED.marker, "
                    "updated_at = EXCLUDED.updated_at",
                {s_.pipeline, stream_, marker.dump()})
        .status();
  }

  // The staged changes, set-based: one DELETE and one INSERT ... ON CONFLICT for the whole batch.
  Status ApplyChanges() override {
    if (pending_.deletes > 0) {
      std::string on;
      for (size_t k : keys_) {
        if (!on.empty()) on += " AND ";
        const std::string c = QuoteIdent(schema_->fields[k].name);
        on += "t." + c + " = d." + c;
      }
      // Temporary tables have no statistics until analyzed: without them the planner may hash
      // the whole target for a handful of keys instead of probing its primary key.
      FERRY_RETURN_IF_ERROR(conn_->Exec("ANALYZE pg_temp.ferry_deletes"));
      FERRY_RETURN_IF_ERROR(conn_->Exec("DELETE FROM " + target_ +
                                        " AS t USING pg_temp.ferry_deletes AS d WHERE " + on));
    }
    if (pending_.upserts > 0) {
      std::string set;
      for (size_t i = 0; i < schema_->fields.size(); ++i) {
        if (std::find(keys_.begin(), keys_.end(), i) != keys_.end()) continue;
        if (!set.empty()) set += ", ";
        const std::string c = QuoteIdent(schema_->fields[i].name);
        set += c + " = EXCLUDED." + c;
      }
      FERRY_RETURN_IF_ERROR(
          conn_->Exec("INSERT INTO " + target_ + " (" + ColumnList(*schema_, all_) + ") SELECT " +
                      ColumnList(*schema_, all_) + " FROM pg_temp.ferry_upserts ON CONFLICT (" +
                      ColumnList(*schema_, keys_) + ") " +
                      (set.empty() ? "DO NOTHING" : "DO UPDATE SET " + set)));
    }
    return Status::OK();
  }

  Status SendCommit(bool cut) override {
    Status s = cut ? conn_->SendAndCut("COMMIT") : conn_->Exec("COMMIT");
    in_txn_ = false;
    return s;
  }
  bool OutcomeUnknown(const Status& s) const override {
    return s.code() == StatusCode::kUnavailable;
  }
  Status Reconnect() override {
    FERRY_ASSIGN_OR_RETURN(auto fresh,
                           PgConnection::Connect(s_.dsn, {.setting = "destination.dsn"}));
    {
      std::lock_guard<std::mutex> lock(conn_mu_);
      conn_ = std::move(fresh);
    }
    staged_ = false;
    return Status::OK();
  }
  Result<Json> ReadMarker() override {
    FERRY_ASSIGN_OR_RETURN(PgResult r, conn_->Query("SELECT marker::text FROM " +
                                                        Qualified(s_.state_schema, "checkpoints") +
                                                        " WHERE pipeline = $1 AND split = $2",
                                                    {s_.pipeline, stream_}));
    return ParseMarker(r, TableText());
  }

  Settings s_;
  std::mutex conn_mu_;  // guards replacing conn_, for Interrupt
  std::unique_ptr<PgConnection> conn_;
  std::string stream_;
  std::string target_;  // quoted, qualified
  std::string load_name_;
  std::string load_;  // quoted, qualified; set by StartLoad
  bool in_txn_ = false;
  bool staged_ = false;
  std::string buf_;
};

// Rows of a table read back with COPY binary, for `ferry verify`.
class PostgresReader : public TableReader {
 public:
  PostgresReader(std::unique_ptr<PgConnection> conn, std::string table,
                 std::shared_ptr<const Schema> schema, std::vector<ferry::pg::CopyField> fields)
      : conn_(std::move(conn)),
        table_(std::move(table)),
        schema_(std::move(schema)),
        fields_(std::move(fields)) {}
  const std::shared_ptr<const Schema>& schema() const override { return schema_; }
  std::string Version() const override { return ""; }
  Status Read(const std::function<Status(const Batch&)>& each) override {
    std::string cols;
    for (const auto& f : fields_) cols += (cols.empty() ? "" : ", ") + QuoteIdent(f.name);
    ferry::pg::CopyBinaryDecoder dec(fields_);
    Batch batch(schema_);
    FERRY_RETURN_IF_ERROR(
        conn_->CopyOut("COPY (SELECT " + cols + " FROM " + table_ + ") TO STDOUT (FORMAT binary)",
                       [&](std::string_view data) -> Status {
                         FERRY_RETURN_IF_ERROR(dec.Feed(data, &batch));
                         if (batch.num_rows() >= 8192) {
                           FERRY_RETURN_IF_ERROR(each(batch));
                           batch.Clear();
                         }
                         return Status::OK();
                       }));
    FERRY_RETURN_IF_ERROR(dec.Finish());
    if (batch.num_rows() > 0) FERRY_RETURN_IF_ERROR(each(batch));
    return Status::OK();
  }

 private:
  std::unique_ptr<PgConnection> conn_;
  std::string table_;
  std::shared_ptr<const Schema> schema_;
  std::vector<ferry::pg::CopyField> fields_;
};

class PostgresSink : public Sink {
 public:
  PostgresSink(Settings s, std::unique_ptr<PgConnection> conn)
      : s_(std::move(s)), conn_(std::move(conn)) {}

  // Creates the schemas and ferry's tables when missing.
  Status Prepare() {
    for (const std::string& schema : {s_.state_schema, s_.schema}) {
      FERRY_ASSIGN_OR_RETURN(
          PgResult r, conn_->Query("SELECT 1 FROM pg_namespace WHERE nspname = $1", {schema}));
      if (r.rows() > 0) continue;
      Status st = conn_->Exec("CREATE SCHEMA IF NOT EXISTS " + QuoteIdent(schema));
      if (!st.ok()) {
        return st.WithContext("creating schema " + schema + " (create it, or grant CREATE ON " +
                              "DATABASE to " + conn_->User() + ")");
      }
    }
    const std::string cp = Qualified(s_.state_schema, "checkpoints");
    const std::string loads = Qualified(s_.state_schema, "loads");
    FERRY_ASSIGN_OR_RETURN(PgResult have, conn_->Query("SELECT to_regclass($1) IS NOT NULL AND "
                                                       "to_regclass($2) IS NOT NULL",
                                                       {cp, loads}));
    if (have.Bool(0, 0)) return Status::OK();
    // Two pipelines starting at once must not race on CREATE TABLE.
    Status st = [&]() -> Status {
      FERRY_RETURN_IF_ERROR(conn_->Exec("BEGIN"));
      FERRY_RETURN_IF_ERROR(conn_->Exec("SELECT pg_advisory_xact_lock(7306916011553718901)"));
      FERRY_RETURN_IF_ERROR(
          conn_->Exec("CREATE TABLE IF NOT EXISTS " + cp +
                      " (pipeline text NOT NULL, split text NOT NULL, marker jsonb NOT NULL, "
                      "updated_at timestamptz NOT NULL, PRIMARY KEY (pipeline, split))"));
      FERRY_RETURN_IF_ERROR(
          conn_->Exec("CREATE TABLE IF NOT EXISTS " + loads +
                      " (pipeline text NOT NULL, split text NOT NULL, run text NOT NULL, "
                      "load_table text NOT NULL, PRIMARY KEY (pipeline, split, run))"));
      return conn_->Exec("COMMIT");
    }();
    if (!st.ok()) {
      (void)conn_->Exec("ROLLBACK");
      return st.WithContext("creating ferry's checkpoint tables in schema " + s_.state_schema);
    }
    return Status::OK();
  }

  std::string Describe() const override {
    return conn_->Describe() + ", schema " + s_.schema + " (checkpoints in " + s_.state_schema +
           ")";
  }
  std::string Guarantee() const override {
    return "exactly-once (rows and checkpoint row in one PostgreSQL transaction)";
  }
  std::string TableName(const std::string& stream) const override {
    return s_.schema + "." + stream;
  }

  Result<std::unique_ptr<SinkStream>> OpenStream(const std::string& stream,
                                                 const Schema& source_schema,
                                                 bool replacing) override {
    // PostgreSQL cuts longer names to 63 bytes without an error: two names could become one.
    auto too_long = [&](const std::string& name, const std::string& what) {
      return Status::InvalidArgument(
          what + " '" + name + "' is " + std::to_string(name.size()) +
          " bytes long; PostgreSQL keeps only 63 bytes of a name: rename it in a view on the "
          "source, or exclude the stream");
    };
    if (stream.size() > 63) return too_long(stream, "table");
    for (const Field& f : source_schema.fields) {
      if (f.name.size() > 63) return too_long(f.name, "column of " + TableName(stream) + ",");
    }
    FERRY_ASSIGN_OR_RETURN(auto conn,
                           PgConnection::Connect(s_.dsn, {.setting = "destination.dsn"}));
    const std::string target = Qualified(s_.schema, stream);
    FERRY_ASSIGN_OR_RETURN(TableDesc desc, DescribeTable(conn.get(), target));
    if (!desc.exists) {
      Status st = conn->Exec("CREATE TABLE IF NOT EXISTS " + target + " (" +
                             ColumnDefinitions(source_schema, true) + ")");
      if (!st.ok()) {
        // Another pipeline may have created it at the same moment (PostgreSQL then reports a
        // duplicate row type): what counts is whether the table is there now.
        FERRY_ASSIGN_OR_RETURN(desc, DescribeTable(conn.get(), target));
        if (!desc.exists) return st.WithContext("creating table " + TableName(stream));
      }
    }
    if (desc.exists && !replacing) {
      FERRY_RETURN_IF_ERROR(Evolve(conn.get(), stream, desc, source_schema));
    }
    FERRY_ASSIGN_OR_RETURN(Json marker, ReadMarkerOn(conn.get(), stream));
    auto schema = std::make_shared<const Schema>(source_schema);
    return std::unique_ptr<SinkStream>(
        new PostgresStream(s_, std::move(conn), stream, std::move(schema), std::move(marker)));
  }

  Result<Json> ReadMarker(const std::string& stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    return ReadMarkerOn(conn_.get(), stream);
  }

  Result<std::unique_ptr<TableReader>> OpenReader(const std::string& stream) override {
    FERRY_ASSIGN_OR_RETURN(auto conn,
                           PgConnection::Connect(s_.dsn, {.setting = "destination.dsn"}));
    const std::string target = Qualified(s_.schema, stream);
    FERRY_ASSIGN_OR_RETURN(TableDesc desc, DescribeTable(conn.get(), target));
    if (!desc.exists) return std::unique_ptr<TableReader>();
    auto schema = std::make_shared<Schema>();
    std::vector<ferry::pg::CopyField> fields;
    std::vector<std::pair<int, int32_t>> key;
    for (const auto& c : desc.columns) {
      ferry::pg::PgMapping m = ferry::pg::MapPgType(c.type, c.name);
      if (!m.error.empty()) {
        return Status::NotSupported("table " + TableName(stream) + ": " + m.error);
      }
      Field f;
      f.id = static_cast<int32_t>(schema->fields.size()) + 1;
      f.name = c.name;
      f.type = m.type;
      f.required = c.not_null;
      if (c.pk_position > 0) key.emplace_back(c.pk_position, f.id);
      fields.push_back({c.name, m.wire, static_cast<int>(schema->fields.size())});
      schema->fields.push_back(std::move(f));
    }
    SetKeyInOrder(std::move(key), schema.get());
    return std::unique_ptr<TableReader>(
        new PostgresReader(std::move(conn), target, std::move(schema), std::move(fields)));
  }

 private:
  Result<Json> ReadMarkerOn(PgConnection* conn, const std::string& stream) {
    FERRY_ASSIGN_OR_RETURN(PgResult r, conn->Query("SELECT marker::text FROM " +
                                                       Qualified(s_.state_schema, "checkpoints") +
                                                       " WHERE pipeline = $1 AND split = $2",
                                                   {s_.pipeline, stream}));
    return ParseMarker(r, TableName(stream));
  }

  // Brings an existing table to the source's columns: added columns and widened types are
  // applied; anything else would lose data or break the key, and stops with the fix.
  Status Evolve(PgConnection* conn, const std::string& stream, const TableDesc& desc,
                const Schema& source_schema) {
    const std::string target = Qualified(s_.schema, stream);
    FERRY_RETURN_IF_ERROR(CheckSameKey(desc.PrimaryKey(), source_schema, TableName(stream)));
    std::vector<std::string> alters;
    for (const Field& f : source_schema.fields) {
      const std::string want = pg::PgTypeName(f.type);
      const TableColumn* c = desc.Find(f.name);
      if (c == nullptr) {
        alters.push_back("ADD COLUMN " + QuoteIdent(f.name) + " " + want);
        continue;
      }
      switch (pg::CompareColumnType(c->type.display, f.type)) {
        case TypeChange::kSame:
          break;
        case TypeChange::kWiden:
          alters.push_back("ALTER COLUMN " + QuoteIdent(f.name) + " TYPE " + want);
          break;
        case TypeChange::kRefused:
          return Status::InvalidArgument(
              "column " + f.name + " of " + TableName(stream) + " is " + c->type.display +
              " but the source now has " + want + " (" + f.type.ToIceberg() +
              "); ferry applies only widening changes in place: run a full refresh of the "
              "stream, which recreates the table, or change the column yourself");
      }
    }
    if (alters.empty()) return Status::OK();
    const std::string sql = AlterTableSql(target, alters);
    FERRY_LOG(kInfo) << TableName(stream) << ": schema change applied: " << sql;
    Status st = conn->Exec(sql);
    if (!st.ok()) return st.WithContext("changing the columns of " + TableName(stream));
    return Status::OK();
  }

  Settings s_;
  std::mutex mu_;  // guards conn_
  std::unique_ptr<PgConnection> conn_;
};

}  // namespace

Result<std::unique_ptr<Sink>> OpenPostgresSink(config::DestinationConfig& cfg,
                                               const std::string& pipeline) {
  config::Options& o = cfg.options;
  Settings s;
  s.pipeline = pipeline;
  FERRY_ASSIGN_OR_RETURN(s.dsn, o.TakeString("dsn"));
  s.schema = o.TakeOptionalString("schema").value_or("public");
  s.state_schema = o.TakeOptionalString("state_schema").value_or("ferry_state");
  FERRY_RETURN_IF_ERROR(o.CheckAllUsed({"dsn", "schema", "state_schema"}));
  if (s.schema.empty() || s.state_schema.empty()) {
    return Status::InvalidArgument(
        "destination.schema and destination.state_schema must not be "
        "empty");
  }
  if (s.schema == s.state_schema) {
    return Status::InvalidArgument("destination.schema and destination.state_schema are both '" +
                                   s.schema + "'; give ferry's checkpoint tables their own schema");
  }
  auto conn = PgConnection::Connect(s.dsn, {.setting = "destination.dsn"});
  if (!conn.ok()) return conn.status().WithContext("connecting to the destination");
  auto sink = std::make_unique<PostgresSink>(s, std::move(*conn));
  FERRY_RETURN_IF_ERROR(sink->Prepare());
  return std::unique_ptr<Sink>(std::move(sink));
}

}  // namespace ferry::sink
