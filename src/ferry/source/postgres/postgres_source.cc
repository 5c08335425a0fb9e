#include "ferry/source/postgres/postgres_source.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "ferry/base/channel.h"
#include "ferry/source/postgres/pg_changes.h"
#include "ferry/source/postgres/pgoutput.h"

#include "ferry/base/fault.h"
#include "ferry/base/log.h"
#include "ferry/clients/postgres/copy_binary.h"
#include "ferry/clients/postgres/pg_conn.h"
#include "ferry/clients/postgres/pg_types.h"
#include "ferry/source/postgres/partitions.h"

namespace ferry::source {
namespace {

using pg::CopyBinaryDecoder;
using pg::CopyField;
using pg::PgConnection;
using pg::PgResult;
using pg::PgWire;
using pg::QuoteIdent;

constexpr int64_t kMaxBlock = int64_t{1} << 32;  // block numbers are 32-bit
constexpr int kSampleBlocks = 8;                 // blocks counted when a table was never analyzed

// What ReadChunk and PlanChunks need to know about a discovered stream.
struct Relation {
  uint32_t oid = 0;
  std::string schema;
  std::string table;
  char relkind = 'r';  // r table, p partitioned table, v view, m materialized view
  std::vector<PgWire> wires;
  std::vector<pg::PgBaseType> bases;     // per column, domains resolved
  std::vector<uint32_t> type_oids;       // per column, as declared (a domain's own oid)
  std::vector<std::string> primary_key;  // the table's own key (a stream may override it)
  std::vector<std::string> names;        // per column
  // SELECT on the whole table (not only on some columns): system columns (ctid) can be read.
  bool whole = true;
  std::string Qualified() const { return QuoteIdent(schema) + "." + QuoteIdent(table); }
  std::string Display() const { return schema + "." + table; }
  bool Heap() const { return relkind == 'r' || relkind == 'm'; }
};

std::string StreamName(const std::string& schema, const std::string& table) {
  return schema == "public" ? table : schema + "." + table;
}

std::string ReplicaIdentityName(char c) {
  switch (c) {
    case 'd':
      return "default";
    case 'n':
      return "nothing";
    case 'f':
      return "full";
    case 'i':
      return "index";
  }
  return "";
}

std::string Tid(int64_t block) { return "'(" + std::to_string(block) + ",0)'::tid"; }

// Logical-replication settings (source keys slot, publication, truncate).
struct CdcOptions {
  std::string dsn;  // to open the replication and lookup sessions; never printed
  std::string slot;
  std::string publication;
  bool ignore_truncate = false;
  // Run by the log watch every heartbeat_interval (empty: none), so that the server's WAL end
  // moves on while nothing else writes to it.
  std::string heartbeat_statement;
};

// The slot as another session sees it: how far the server's WAL is past what ferry committed,
// and what the slot keeps.
class PgLogWatch final : public Source::LogWatch {
 public:
  PgLogWatch(std::unique_ptr<PgConnection> conn, CdcOptions cdc)
      : conn_(std::move(conn)), cdc_(std::move(cdc)) {}

  Result<Source::LogStatus> Look(Position confirmed) override {
    // The slot's confirmed position stands for ferry's until every stream has one.
    const std::string from = confirmed.kind() == Position::Kind::kLsn
                                 ? "'" + pg::FormatLsn(confirmed.lsn()) + "'::pg_lsn"
                                 : "confirmed_flush_lsn";
    FERRY_ASSIGN_OR_RETURN(
        PgResult r, conn_->Query("SELECT (pg_current_wal_lsn() - " + from +
                                     ")::bigint, (pg_current_wal_lsn() - restart_lsn)::bigint FROM "
                                     "pg_replication_slots WHERE slot_name = $1",
                                 {cdc_.slot}));
    Source::LogStatus out;
    out.retained_by = "replication slot " + cdc_.slot;
    if (r.rows() == 0) return out;  // not made yet (a first sync sets it up)
    if (!r.IsNull(0, 0))
      out.behind_bytes = static_cast<uint64_t>(std::max<int64_t>(0, r.Int64(0, 0)));
    if (!r.IsNull(0, 1))
      out.retained_bytes = static_cast<uint64_t>(std::max<int64_t>(0, r.Int64(0, 1)));
    return out;
  }

  Result<bool> Heartbeat() override {
    if (cdc_.heartbeat_statement.empty()) return false;
    Status s = conn_->Exec(cdc_.heartbeat_statement);
    if (!s.ok()) return s.WithContext("source.heartbeat_statement");
    return true;
  }

  std::string RetainedFix() const override {
    return "the slot keeps WAL from the oldest change a stream has not committed: if ferry has "
           "stopped for good, drop the slot (SELECT pg_drop_replication_slot('" +
           cdc_.slot +
           "')) and start the cdc streams over (a new backfill); if it is catching up, let it";
  }

 private:
  std::unique_ptr<PgConnection> conn_;
  CdcOptions cdc_;
};

constexpr size_t kLookupKeys = 500;      // keys per TOAST lookup query
constexpr size_t kPeekChanges = 200000;  // log messages verify looks through, at most
// Replication messages received ahead of the decoder, at most (see StartReader).
constexpr size_t kReadAheadBytes = size_t{64} << 20;

// One item from the replication session's reader thread to the decoder.
struct StreamItem {
  enum Kind { kData, kKeepalive, kError } kind = kData;
  std::string payload;  // kData: one pgoutput message
  pg::Lsn wal_end = 0;  // kKeepalive: everything before it was sent
  Status error;
};

class PostgresSource final : public Source {
 public:
  PostgresSource(std::unique_ptr<PgConnection> conn, std::vector<std::string> schemas,
                 CdcOptions cdc)
      : conn_(std::move(conn)), schemas_(std::move(schemas)), cdc_(std::move(cdc)) {}
  ~PostgresSource() override { StopReader(); }

  Result<std::vector<StreamInfo>> Discover() override {
    std::optional<std::string> schema_filter;
    if (!schemas_.empty()) {
      std::string joined;
      for (const auto& s : schemas_) joined += (joined.empty() ? "" : ",") + s;
      schema_filter = joined;
    }
    FERRY_ASSIGN_OR_RETURN(
        auto rels,
        conn_->Query(
            "SELECT c.oid, n.nspname, c.relname, c.relkind, c.reltuples::float8, c.relreplident,"
            "       has_schema_privilege(n.oid, 'USAGE') AND"
            "       has_any_column_privilege(c.oid, 'SELECT'),"
            "       CASE WHEN c.relkind IN ('r','m') THEN pg_relation_size(c.oid) /"
            "            current_setting('block_size')::int8 ELSE 0 END,"
            "       has_table_privilege(c.oid, 'SELECT')"
            "  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE c.relkind IN ('r','p','v','m') AND NOT c.relispartition"
            "   AND n.nspname <> 'information_schema' AND n.nspname !~ '^pg_'"
            "   AND ($1::text IS NULL OR n.nspname = ANY (string_to_array($1::text, ',')))"
            " ORDER BY n.nspname, c.relname",
            {schema_filter}));
    std::vector<StreamInfo> out;
    relations_.clear();
    std::map<std::string, int> seen;
    for (int i = 0; i < rels.rows(); ++i) {
      Relation rel;
      rel.oid = static_cast<uint32_t>(rels.Int64(i, 0));
      rel.schema = rels.Text(i, 1);
      rel.table = rels.Text(i, 2);
      rel.relkind = rels.Text(i, 3)[0];
      StreamInfo info;
      info.ns = rel.schema;
      info.name = StreamName(rel.schema, rel.table);
      info.replica_identity =
          rel.Heap() || rel.relkind == 'p' ? ReplicaIdentityName(rels.Text(i, 5)[0]) : "";
      info.table_id = std::to_string(rel.oid);
      rel.whole = rels.Bool(i, 8);
      FERRY_RETURN_IF_ERROR(DescribeColumns(&rel, &info, /*readable=*/rels.Bool(i, 6)));
      if (!rels.Bool(i, 6)) {
        AddError(&info, "user " + conn_->User() + " may not read " + rel.Display() +
                            ": grant SELECT on " + QuoteIdent(rel.schema) + "." +
                            QuoteIdent(rel.table) + " (and USAGE on schema " +
                            QuoteIdent(rel.schema) + ") to " + QuoteIdent(conn_->User()));
      }
      int64_t blocks = rels.Int64(i, 7);
      double reltuples = rels.Double(i, 4);
      switch (rel.relkind) {
        case 'r':
        case 'm':
          if (auto key = IntegerKey(info, rel)) {
            info.chunking = "ranges of primary key " + *key;
          } else if (auto keys = TupleKey(info, rel)) {
            std::string names;
            for (const auto& k : *keys) names += (names.empty() ? "" : ", ") + k;
            info.chunking = "ranges of primary key (" + names + ")";
          } else {
            info.chunking = "ctid block ranges";
          }
          if (reltuples >= 0) {
            info.estimated_rows = static_cast<int64_t>(reltuples);
          } else if (blocks > 0 && rel.whole) {  // the sample counts by ctid
            FERRY_ASSIGN_OR_RETURN(double per_block, SampleRowsPerBlock(rel, blocks));
            info.estimated_rows = static_cast<int64_t>(per_block * static_cast<double>(blocks));
          }
          break;
        case 'p': {
          FERRY_ASSIGN_OR_RETURN(std::vector<uint32_t> leaves,
                                 pg::LeafPartitions(conn_.get(), rel.oid));
          info.table_id = pg::TableIdentity{rel.oid, true, std::move(leaves)}.ToString();
          // Key ranges are pruned to the partitions that hold them; without a single integer
          // key the partitioned table is read in one chunk.
          if (auto key = IntegerKey(info, rel)) {
            info.chunking = "ranges of primary key " + *key + " (across partitions)";
          } else {
            info.chunking = "one chunk per partition";
          }
          FERRY_ASSIGN_OR_RETURN(auto est,
                                 conn_->Query("SELECT COALESCE(sum(GREATEST(c.reltuples, 0)), "
                                              "0)::int8 FROM pg_partition_tree($1::oid) t"
                                              " JOIN pg_class c ON c.oid = t.relid WHERE t.isleaf",
                                              {std::to_string(rel.oid)}));
          info.estimated_rows = est.Int64(0, 0);
          break;
        }
        default:
          info.chunking = "whole view";
          break;
      }
      if (++seen[info.name] > 1) {
        AddError(&info,
                 "stream name " + info.name +
                     " names two relations (a table of schema "
                     "public whose name contains a dot and a table of another schema); rename "
                     "one of them");
      }
      relations_[info.name] = std::move(rel);
      out.push_back(std::move(info));
    }
    return out;
  }

  Status BeginSnapshot() override {
    std::string exported;
    if (!cdc_streams_.empty()) {
      FERRY_RETURN_IF_ERROR(EnsurePublication());
      FERRY_ASSIGN_OR_RETURN(exported, EnsureSlot());
    }
    FERRY_RETURN_IF_ERROR(conn_->Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"));
    in_snapshot_ = true;
    if (!exported.empty()) {
      // The slot was created just now: read the tables at its consistent point, so that the
      // backfill and the changes after it meet exactly.
      FERRY_ASSIGN_OR_RETURN(std::string lit, conn_->Literal(exported));
      FERRY_RETURN_IF_ERROR(conn_->Exec("SET TRANSACTION SNAPSHOT " + lit));
    }
    // Exporting the snapshot lets snapshot readers (OpenSnapshotReader) share it. It is exported
    // again from this transaction: the slot's own export ends with the replication session's
    // next command. (On a standby nothing can be exported; the transaction still gives one
    // consistent point, read by one reader.)
    // The snapshot is taken by this first statement of the transaction (unless imported): every
    // transaction it sees committed before the log position read with it.
    FERRY_ASSIGN_OR_RETURN(
        auto r,
        conn_->Query("SELECT CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_export_snapshot() END,"
                     " (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE "
                     "pg_current_wal_insert_lsn() END)::text"));
    snapshot_id_ = r.IsNull(0, 0) ? "" : r.Text(0, 0);
    if (!exported.empty()) {
      snapshot_lsn_ = slot_start_;  // the slot's consistent point
    } else if (!r.IsNull(0, 1)) {
      FERRY_ASSIGN_OR_RETURN(snapshot_lsn_, pg::ParseLsn(r.Text(0, 1)));
    }
    FERRY_LOG(kDebug) << "PostgreSQL snapshot "
                      << (snapshot_id_.empty() ? "(not exported)" : snapshot_id_);
    return Status::OK();
  }

  Result<std::unique_ptr<Source>> OpenSnapshotReader() override {
    if (!in_snapshot_ || snapshot_id_.empty()) return std::unique_ptr<Source>();
    FERRY_ASSIGN_OR_RETURN(auto conn, PgConnection::Connect(cdc_.dsn));
    std::unique_ptr<PostgresSource> reader(new PostgresSource(std::move(conn), schemas_, cdc_));
    reader->relations_ = relations_;
    reader->types_ = types_;
    FERRY_RETURN_IF_ERROR(reader->conn_->Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"));
    FERRY_ASSIGN_OR_RETURN(std::string lit, reader->conn_->Literal(snapshot_id_));
    FERRY_RETURN_IF_ERROR(reader->conn_->Exec("SET TRANSACTION SNAPSHOT " + lit)
                              .WithContext("importing snapshot " + snapshot_id_));
    reader->in_snapshot_ = true;
    return std::unique_ptr<Source>(std::move(reader));
  }

  Status EndSnapshot() override {
    if (!in_snapshot_) return Status::OK();
    in_snapshot_ = false;
    return conn_->Exec("COMMIT");
  }

  // The table's primary key when it is one integer column (int2/int4/int8): full refresh splits
  // on its ranges.
  static std::optional<std::string> IntegerKey(const StreamInfo& stream, const Relation& rel) {
    if (stream.primary_key.size() != 1) return std::nullopt;
    for (size_t i = 0; i < stream.columns.size(); ++i) {
      if (stream.columns[i].name != stream.primary_key[0]) continue;
      if (stream.columns[i].type.kind() != TypeKind::kInt32 &&
          stream.columns[i].type.kind() != TypeKind::kInt64) {
        return std::nullopt;
      }
      (void)rel;
      return stream.columns[i].name;
    }
    return std::nullopt;
  }

  // The table's own primary key when it is not one integer column (text, uuid, numeric, dates,
  // several columns): full refresh splits on its ranges in the server's order (a primary key has
  // a b-tree index, and no NULL). A stream whose primary_key setting names other columns is split
  // by ctid ranges.
  static std::optional<std::vector<std::string>> TupleKey(const StreamInfo& stream,
                                                          const Relation& rel) {
    if (!rel.Heap() || rel.primary_key.empty() || stream.primary_key != rel.primary_key ||
        IntegerKey(stream, rel)) {
      return std::nullopt;
    }
    return rel.primary_key;
  }

  // ChunkPlan::key of a plan over TupleKey: the key's columns as a JSON array.
  static std::string TupleKeyName(const std::vector<std::string>& key) {
    return nlohmann::json(key).dump();
  }

  // A block sample of `rel` (TABLESAMPLE SYSTEM reads only the sampled blocks, so planning costs
  // a fraction of a scan) of about 50 rows per chunk, 2,000 to 500,000 rows in all, whatever the
  // statistics say. The sampled rows are counted first (nothing is sent): a sample too small is
  // taken again ten times larger, up to the whole table; one far larger than wanted (statistics
  // behind the table) is shrunk. Each sampled row stands for 100/pct rows.
  struct Sample {
    double pct = 100;
    double rows = 0;  // rows of the sample as counted (before a shrink)
    std::string Clause() const {
      char text[32];
      std::snprintf(text, sizeof text, "%.9g", pct);
      return std::string(" TABLESAMPLE SYSTEM (") + text + ") REPEATABLE (0)";
    }
  };
  Result<Sample> SampleOf(const Relation& rel, const std::string& where, int64_t estimate,
                          int64_t chunk_rows) {
    constexpr double kMinSample = 1000;
    const double wanted = std::clamp(static_cast<double>(std::max<int64_t>(estimate, 1)) /
                                         static_cast<double>(chunk_rows) * 50.0,
                                     2000.0, 500000.0);
    Sample s;
    s.pct = estimate > 0 ? std::min(100.0, wanted / static_cast<double>(estimate) * 100.0) : 0.01;
    for (;;) {
      FERRY_ASSIGN_OR_RETURN(
          auto r, conn_->Query("SELECT count(*) FROM " + From(rel) + " r" + s.Clause() + where));
      s.rows = static_cast<double>(r.Int64(0, 0));
      if (s.rows >= kMinSample || s.pct >= 100.0) break;
      s.pct = std::min(100.0, s.pct * 10.0);
    }
    if (s.rows > 2 * wanted) s.pct *= wanted / s.rows;  // SYSTEM with one seed: a subset
    return s;
  }

  // Chunks of an integer key `c` whose values lo..hi may be sparse or skewed: boundaries at the
  // quantiles of a sample of the key (SampleOf). Keys so dense that the grid fits keep the grid.
  Result<ChunkPlan> SampledKeyPlan(const Relation& rel, const std::string& c, int64_t estimate,
                                   int64_t lo, int64_t hi, int64_t chunk_rows) {
    const std::string where = " WHERE " + c + " IS NOT NULL";
    FERRY_ASSIGN_OR_RETURN(Sample s, SampleOf(rel, where, estimate, chunk_rows));
    FERRY_ASSIGN_OR_RETURN(auto r, conn_->Query("SELECT " + c + "::int8 FROM " + From(rel) + " r" +
                                                s.Clause() + where + " ORDER BY 1"));
    std::vector<int64_t> keys;
    keys.reserve(static_cast<size_t>(r.rows()));
    for (int i = 0; i < r.rows(); ++i) keys.push_back(r.Int64(i, 0));
    const double weight = 100.0 / s.pct;
    const auto rows = static_cast<int64_t>(static_cast<double>(keys.size()) * weight);
    if (auto grid = GridPlan(lo, hi, rows, chunk_rows)) return *grid;
    ChunkPlan plan = BoundariesPlan(keys, weight, chunk_rows);
    plan.rows = rows;
    return plan;
  }

  // Chunks of a TupleKey: boundaries at the quantiles of a sample (SampleOf), picked by the
  // server in the key's own order (its operators and collation, which ferry never imitates), so
  // that only the boundaries are sent, as text.
  Result<ChunkPlan> SampledTuplePlan(const Relation& rel, const std::vector<std::string>& key,
                                     int64_t estimate, int64_t chunk_rows) {
    ChunkPlan plan;
    plan.key = TupleKeyName(key);
    chunk_rows = std::max<int64_t>(chunk_rows, 1);
    if (estimate > 0 && estimate <= chunk_rows / 2) return plan;  // one chunk
    FERRY_ASSIGN_OR_RETURN(Sample s, SampleOf(rel, "", estimate, chunk_rows));
    const double weight = 100.0 / s.pct;
    const int64_t every = BoundaryEvery(weight, chunk_rows);
    std::string values;
    std::string order;
    for (size_t i = 0; i < key.size(); ++i) {
      values += "r." + QuoteIdent(key[i]) + "::text AS b" + std::to_string(i) + ", ";
      order += (i > 0 ? ", r." : "r.") + QuoteIdent(key[i]);
    }
    // The boundaries are in the table's order (the ORDER BY of the window); the last column
    // counts the sample, for the plan's row estimate.
    FERRY_ASSIGN_OR_RETURN(
        auto r,
        conn_->Query("SELECT * FROM (SELECT " + values + "row_number() OVER (ORDER BY " + order +
                     ") AS n, count(*) OVER () AS sampled FROM " + From(rel) + " r" + s.Clause() +
                     ") AS s WHERE n % " + std::to_string(every) + " = 0 ORDER BY n"));
    const int k = static_cast<int>(key.size());
    for (int i = 0; i < r.rows(); ++i) {
      nlohmann::json b = nlohmann::json::array();
      for (int c = 0; c < k; ++c) b.push_back(r.Text(i, c));
      plan.key_bounds.push_back(std::move(b));
    }
    const double sampled = r.rows() > 0 ? static_cast<double>(r.Int64(0, k + 1)) : s.rows;
    plan.rows = static_cast<int64_t>(sampled * weight);
    plan.count = static_cast<int64_t>(plan.key_bounds.size()) + 1;
    return plan;
  }

  Result<ChunkPlan> PlanChunks(const StreamInfo& stream, int64_t chunk_rows) override {
    FERRY_ASSIGN_OR_RETURN(const Relation* rel, Find(stream));
    if (!rel->Heap() && rel->relkind != 'p') return ChunkPlan{};
    if (auto key = IntegerKey(stream, *rel)) {
      // Ranges of a single integer primary key: a row keeps its chunk when it is updated, so a
      // load resumed from a newer snapshot can neither miss it nor copy it twice (ctid ranges
      // could: an UPDATE moves a row to another block).
      const std::string c = QuoteIdent(*key);
      int64_t bounds[2];
      const char* order[2] = {"ASC", "DESC"};
      for (int i = 0; i < 2; ++i) {
        FERRY_ASSIGN_OR_RETURN(
            auto r, conn_->Query("SELECT " + c + "::int8 FROM " + From(*rel) + " ORDER BY " + c +
                                 " " + order[i] + " LIMIT 1"));
        if (r.rows() == 0 || r.IsNull(0, 0)) return ChunkPlan{};
        bounds[i] = r.Int64(0, 0);
      }
      chunk_rows = std::max<int64_t>(chunk_rows, 1);
      if (stream.estimated_rows > 0) {
        if (auto grid = GridPlan(bounds[0], bounds[1], stream.estimated_rows, chunk_rows)) {
          grid->key = *key;
          return *grid;
        }
      }
      FERRY_ASSIGN_OR_RETURN(ChunkPlan plan, SampledKeyPlan(*rel, c, stream.estimated_rows,
                                                            bounds[0], bounds[1], chunk_rows));
      plan.key = *key;
      return plan;
    }
    if (auto key = TupleKey(stream, *rel)) {
      return SampledTuplePlan(*rel, *key, stream.estimated_rows, chunk_rows);
    }
    if (rel->relkind == 'p') {
      // One chunk per leaf partition, in name order; the key names the list (its hash), so that
      // a resumed load reads the partitions it planned or stops.
      FERRY_ASSIGN_OR_RETURN(auto leaves, Partitions(*rel));
      if (leaves.empty()) return ChunkPlan{};
      ChunkPlan plan;
      plan.first = 0;
      plan.step = 1;
      plan.count = static_cast<int64_t>(leaves.size());
      plan.key = PartitionsKey(leaves);
      return plan;
    }
    if (!rel->Heap()) return ChunkPlan{};
    FERRY_ASSIGN_OR_RETURN(
        auto r,
        conn_->Query("SELECT pg_relation_size($1::oid) / current_setting('block_size')::int8,"
                     "       c.relpages, c.reltuples::float8 FROM pg_class c WHERE c.oid = $1::oid",
                     {std::to_string(rel->oid)}));
    if (r.rows() != 1) return Status::NotFound("table " + rel->Display() + " no longer exists");
    int64_t blocks = r.Int64(0, 0);
    if (blocks <= 0) return ChunkPlan{};
    int64_t relpages = r.Int64(0, 1);
    double reltuples = r.Double(0, 2);
    double per_block;
    if (relpages > 0 && reltuples > 0) {
      per_block = reltuples / static_cast<double>(relpages);
    } else {
      FERRY_ASSIGN_OR_RETURN(per_block, SampleRowsPerBlock(*rel, blocks));
    }
    ChunkPlan plan;
    plan.first = 0;
    plan.step = std::clamp<int64_t>(
        static_cast<int64_t>(static_cast<double>(chunk_rows) / std::max(per_block, 1.0)), 1,
        kMaxBlock);
    plan.count = (blocks + plan.step - 1) / plan.step;
    plan.key = "ctid";
    return plan;
  }

  Result<std::string> TableChanged(const StreamInfo& stream, const std::string& held) override {
    if (held.empty()) return std::string();
    FERRY_ASSIGN_OR_RETURN(const Relation* rel, Find(stream));
    FERRY_ASSIGN_OR_RETURN(pg::TableIdentity was, pg::TableIdentity::Parse(held));
    FERRY_ASSIGN_OR_RETURN(pg::TableIdentity now, pg::TableIdentity::Parse(stream.table_id));
    if (was.relid != now.relid) {
      return "table " + rel->Display() +
             " was dropped and created again on the source (its rows are of relation " +
             std::to_string(was.relid) + "; the table is relation " + std::to_string(now.relid) +
             " now)";
    }
    return pg::PartitionsDiverge(conn_.get(), rel->Display(), was, now);
  }

  Result<std::string> StalePlan(const StreamInfo& stream, const ChunkPlan& plan) override {
    FERRY_ASSIGN_OR_RETURN(const Relation* rel, Find(stream));
    if (plan.key.rfind(kPartitionsKey, 0) == 0) {
      if (rel->relkind != 'p') return std::string("it is no longer a partitioned table");
      FERRY_ASSIGN_OR_RETURN(auto leaves, Partitions(*rel));
      if (PartitionsKey(leaves) != plan.key) {
        return std::string("its partitions changed since the load was planned");
      }
    } else if (!plan.key.empty() && plan.key[0] == '[') {
      auto key = TupleKey(stream, *rel);
      if (!key || TupleKeyName(*key) != plan.key) {
        return "columns " + plan.key + " are no longer its primary key";
      }
    } else if (!plan.key.empty() && plan.key != "ctid") {
      auto key = IntegerKey(stream, *rel);
      if (!key || *key != plan.key) {
        return "column " + plan.key + " is no longer its single integer primary key";
      }
    }
    return std::string();
  }

  // " WHERE (k1, k2) >= (...) AND (k1, k2) < (...)": the chunk's rows by a TupleKey's row
  // comparison (the bounds as escaped literals, typed by the server from the columns: COPY takes
  // no parameters); empty for a chunk open at both ends.
  Result<std::string> TupleRange(const Relation& rel, const std::vector<std::string>& key,
                                 const Chunk& chunk) {
    std::string columns;
    for (const auto& k : key) columns += (columns.empty() ? "(" : ", ") + QuoteIdent(k);
    columns += ")";
    std::string where;
    for (const auto& [bound, op] : {std::pair{&chunk.lo_key, " >= ("}, {&chunk.hi_key, " < ("}}) {
      if (bound->is_null()) continue;
      if (!bound->is_array() || bound->size() != key.size()) {
        return Status::Corruption("chunk bound " + bound->dump() + " of " + rel.Display() +
                                  " does not hold one value per key column (state file or "
                                  "marker damaged?)");
      }
      std::string values;
      for (const auto& v : *bound) {
        if (!v.is_string()) {
          return Status::Corruption("chunk bound " + bound->dump() + " of " + rel.Display() +
                                    " holds a value that is not text (state file or marker "
                                    "damaged?)");
        }
        FERRY_ASSIGN_OR_RETURN(std::string literal, conn_->Literal(v.get<std::string>()));
        values += (values.empty() ? "" : ", ") + literal;
      }
      where += (where.empty() ? " WHERE " : " AND ") + columns + op + values + ")";
    }
    return where;
  }

  Status ReadChunk(const StreamInfo& stream, const Chunk& chunk,
                   std::shared_ptr<const Schema> schema, size_t batch_rows,
                   const std::function<bool(Batch&)>& emit) override {
    FERRY_ASSIGN_OR_RETURN(const Relation* rel, Readable(stream, *schema, "ReadChunk"));
    std::vector<CopyField> fields;
    const std::string select = "COPY (SELECT " + SelectList(*rel, stream, &fields);
    std::string sql = select + " FROM " + From(*rel);
    if (rel->relkind == 'p' && chunk.key.rfind(kPartitionsKey, 0) == 0) {
      FERRY_ASSIGN_OR_RETURN(auto leaves, Partitions(*rel));
      const int64_t i = chunk.lo.value_or(0);
      if (PartitionsKey(leaves) != chunk.key || i < 0 || i >= static_cast<int64_t>(leaves.size())) {
        return Status::InvalidArgument(
            "the partitions of " + rel->Display() +
            " changed while this load was read (one chunk per partition); sync again: the load "
            "then starts over");
      }
      // The chunk's rows are the partition's own: its sub-partitions are leaves of their own.
      sql = select + " FROM ONLY " + leaves[static_cast<size_t>(i)];
    } else if (rel->Heap() && !chunk.key.empty() && chunk.key[0] == '[') {
      auto key = TupleKey(stream, *rel);
      if (!key || TupleKeyName(*key) != chunk.key) {
        return Status::InvalidArgument(
            "the load of " + rel->Display() + " was planned on key columns " + chunk.key +
            ", which are no longer the table's primary key; move the stream's entry out of the "
            "state file (or the state file away) and sync again");
      }
      FERRY_ASSIGN_OR_RETURN(std::string where, TupleRange(*rel, *key, chunk));
      sql += where;
    } else if ((rel->Heap() || rel->relkind == 'p') && !chunk.key.empty() && chunk.key != "ctid") {
      auto key = IntegerKey(stream, *rel);
      if (!key || *key != chunk.key) {
        return Status::InvalidArgument(
            "the load of " + rel->Display() + " was planned on key column " + chunk.key +
            ", which is no longer the table's single integer primary key; move the stream's "
            "entry out of the state file (or the state file away) and sync again");
      }
      const std::string c = QuoteIdent(*key);
      if (chunk.lo) sql += " WHERE " + c + " >= " + std::to_string(*chunk.lo);
      if (chunk.hi) {
        sql += std::string(chunk.lo ? " AND " : " WHERE ") + c + " < " + std::to_string(*chunk.hi);
      }
    } else if (rel->Heap()) {
      for (const auto& b : {chunk.lo, chunk.hi}) {
        if (b && (*b < 0 || *b > kMaxBlock)) {
          return Status::Corruption("chunk bound " + std::to_string(*b) + " of " + rel->Display() +
                                    " is not a block number (state file or marker damaged?)");
        }
      }
      if (chunk.lo) sql += " WHERE ctid >= " + Tid(*chunk.lo);
      if (chunk.hi) sql += std::string(chunk.lo ? " AND" : " WHERE") + " ctid < " + Tid(*chunk.hi);
    }
    sql += ") TO STDOUT (FORMAT binary)";
    return CopyInto(*rel, sql, std::move(fields), std::move(schema), batch_rows, emit);
  }

  Result<nlohmann::json> MaxCursor(const StreamInfo& stream, const std::string& cursor,
                                   const nlohmann::json& above) override {
    if (const std::string p = stream.Problem(); !p.empty()) return Status::NotSupported(p);
    FERRY_ASSIGN_OR_RETURN(const Relation* rel, Find(stream));
    FERRY_ASSIGN_OR_RETURN(CursorColumn cc, CheckCursor(stream, *rel, cursor));
    // ORDER BY ... DESC LIMIT 1 rather than max(): every orderable type has a b-tree order (uuid
    // has no max() before PostgreSQL 18), an index on the column answers it, and it is the very
    // order the window's `>` and `<=` use (same operator class, same collation). The text cast
    // is outside: an ORDER BY naming an output column would sort the text.
    const std::string c = QuoteIdent(cursor);
    std::string where = c + " IS NOT NULL";
    if (!above.is_null()) {
      FERRY_ASSIGN_OR_RETURN(std::string lo, CursorLiteral(*rel, cursor, cc, above));
      where += " AND " + c + " > " + lo;
    }
    FERRY_ASSIGN_OR_RETURN(
        auto r, conn_->Query("SELECT m::text FROM (SELECT " + c + " AS m FROM " + From(*rel) +
                             " WHERE " + where + " ORDER BY " + c + " DESC LIMIT 1) AS top"));
    if (r.rows() == 0 || r.IsNull(0, 0)) return nlohmann::json(nullptr);
    std::string text = r.Text(0, 0);
    if (cc.support.kind == pg::CursorSupport::Kind::kInteger) {
      int64_t v = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || end != text.data() + text.size()) {
        return Status::Internal("table " + rel->Display() + ": cursor maximum '" + text +
                                "' of column " + cursor + " is not an integer");
      }
      return nlohmann::json(v);
    }
    if (text == "NaN" || text == "Infinity" || text == "infinity") {
      return Status::InvalidArgument(
          "table " + rel->Display() + ": the largest value of cursor column " + cursor + " (" +
          stream.columns[cc.index].source_type + ") is " + text +
          (text == "NaN" ? ", which PostgreSQL sorts above every number" : "") +
          ": no change could move the cursor past it, so changed rows would never be read "
          "again; replace that value (by NULL, for instance) or pick another cursor column "
          "(candidates: " +
          Candidates(stream) + ")");
    }
    return nlohmann::json(std::move(text));
  }

  Status ReadCursorRange(const StreamInfo& stream, const std::string& cursor,
                         const CursorRange& range, std::shared_ptr<const Schema> schema,
                         size_t batch_rows, const std::function<bool(Batch&)>& emit) override {
    FERRY_ASSIGN_OR_RETURN(const Relation* rel, Readable(stream, *schema, "ReadCursorRange"));
    FERRY_ASSIGN_OR_RETURN(CursorColumn cc, CheckCursor(stream, *rel, cursor));
    std::vector<CopyField> fields;
    std::string sql = "COPY (SELECT " + SelectList(*rel, stream, &fields);
    const std::string c = QuoteIdent(cursor);
    // A row whose cursor is NULL satisfies no comparison: it is never read.
    sql += " FROM " + From(*rel) + " WHERE " + c + " IS NOT NULL";
    if (!range.lower.is_null()) {
      FERRY_ASSIGN_OR_RETURN(std::string lo, CursorLiteral(*rel, cursor, cc, range.lower));
      sql += " AND " + c + (range.lower_closed ? " >= " : " > ") + lo;
    }
    if (!range.upper.is_null()) {
      FERRY_ASSIGN_OR_RETURN(std::string hi, CursorLiteral(*rel, cursor, cc, range.upper));
      sql += " AND " + c + (range.upper_closed ? " <= " : " < ") + hi;
    }
    sql += " ORDER BY " + c + ") TO STDOUT (FORMAT binary)";
    return CopyInto(*rel, sql, std::move(fields), std::move(schema), batch_rows, emit);
  }

  // ---- Change data capture: logical replication (pgoutput, binary) ----

  Status CheckChangeCapture(const StreamInfo& stream) override {
    FERRY_ASSIGN_OR_RETURN(const Relation* rel, Find(stream));
    if (conn_->ServerVersion() < 140000) {
      return Status::NotSupported(
          "cdc needs PostgreSQL 14 or newer (ferry reads pgoutput in binary mode); this server "
          "is " +
          conn_->Describe() + ": use incremental mode, or upgrade the server");
    }
    if (!server_checked_) {
      FERRY_ASSIGN_OR_RETURN(
          auto r, conn_->Query("SELECT current_setting('wal_level'), r.rolsuper OR "
                               "r.rolreplication FROM pg_roles r WHERE r.rolname = current_user"));
      if (r.rows() != 1) return Status::Internal("the current role is not in pg_roles");
      if (r.Text(0, 0) != "logical") {
        return Status::InvalidArgument(
            "cdc reads PostgreSQL's logical replication, and the server runs with wal_level = " +
            r.Text(0, 0) +
            "; set it with ALTER SYSTEM SET wal_level = logical (or in postgresql.conf) and "
            "restart the server");
      }
      if (!r.Bool(0, 1)) {
        return Status::PermissionDenied("cdc needs the REPLICATION attribute, which user " +
                                        conn_->User() + " lacks; grant it with ALTER ROLE " +
                                        QuoteIdent(conn_->User()) + " REPLICATION");
      }
      server_checked_ = true;
    }
    if (!rel->Heap() && rel->relkind != 'p') {
      return Status::NotSupported("stream " + stream.name +
                                  " is a view: PostgreSQL publishes "
                                  "changes of tables only; use full_refresh or incremental for it");
    }
    if (stream.primary_key.empty()) {
      return Status::InvalidArgument(
          "table " + rel->Display() +
          " has no primary key, so its changes cannot be matched to rows in the destination; add "
          "one (ALTER TABLE " +
          rel->Qualified() +
          " ADD PRIMARY KEY (...)), or set the stream's "
          "primary_key and ALTER TABLE " +
          rel->Qualified() + " REPLICA IDENTITY FULL");
    }
    if (stream.replica_identity == "nothing") {
      return Status::InvalidArgument("table " + rel->Display() +
                                     " has REPLICA IDENTITY NOTHING: its updates and deletes "
                                     "would fail on the source once published; run ALTER TABLE " +
                                     rel->Qualified() + " REPLICA IDENTITY DEFAULT (or FULL)");
    }
    if (stream.primary_key != rel->primary_key && stream.replica_identity != "full") {
      return Status::InvalidArgument(
          "stream " + stream.name +
          " sets primary_key to columns that are not the table's "
          "primary key: PostgreSQL then does not send them with updates and deletes; run ALTER "
          "TABLE " +
          rel->Qualified() + " REPLICA IDENTITY FULL, or drop the primary_key setting");
    }
    return Status::OK();
  }

  // A delete carries the row's old values only with REPLICA IDENTITY FULL (otherwise its key):
  // for a partitioned table, that of every partition, whose rows the log carries.
  Status CheckDeleteImages(const StreamInfo& stream) override {
    FERRY_ASSIGN_OR_RETURN(const Relation* rel, Find(stream));
    FERRY_ASSIGN_OR_RETURN(
        auto r, conn_->Query("SELECT n.nspname, c.relname, c.relreplident FROM pg_class c JOIN "
                             "pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind <> 'p' AND "
                             "c.relreplident <> 'f' AND (c.oid = $1::oid OR c.oid IN (SELECT "
                             "relid FROM pg_partition_tree($1::oid))) ORDER BY 1, 2",
                             {std::to_string(rel->oid)}));
    if (r.rows() == 0) return Status::OK();
    std::string fix;
    for (int i = 0; i < r.rows(); ++i) {
      fix += (fix.empty() ? "" : "; ") + std::string("ALTER TABLE ") + QuoteIdent(r.Text(i, 0)) +
             "." + QuoteIdent(r.Text(i, 1)) + " REPLICA IDENTITY FULL";
    }
    return Status::InvalidArgument(
        "stream " + stream.name + " keeps deleted rows (deletes: soft) with their last values, " +
        "and PostgreSQL's log carries a deleted row's values only with REPLICA IDENTITY FULL (" +
        r.Text(0, 0) + "." + r.Text(0, 1) + " has REPLICA IDENTITY " +
        ReplicaIdentityName(r.Text(0, 2)[0]) + ": its key only); run " + fix +
        ", or use deletes: hard");
  }

  Status PrepareChangeCapture(const StreamInfo& stream) override {
    FERRY_RETURN_IF_ERROR(CheckChangeCapture(stream));
    for (const auto& s : cdc_streams_) {
      if (s.name == stream.name) return Status::OK();
    }
    cdc_streams_.push_back(stream);
    return Status::OK();
  }

  // The slot's starting point for this sync: a backfill starting now applies changes after it.
  Result<Position> ChangeLogEnd(const StreamInfo& stream) override {
    if (!slot_ready_) {
      return Status::Internal("ChangeLogEnd before the replication slot was set up for " +
                              stream.name);
    }
    return Position::Lsn(slot_start_);
  }

  Position::Kind position_kind() const override { return Position::Kind::kLsn; }
  bool SharedLogSelectsColumns() const override { return true; }
  bool SharedChangeLog() const override { return true; }
  Position SnapshotLogPosition() const override { return Position::Lsn(snapshot_lsn_); }

  Result<SharedRead> ReadSharedChanges(
      const std::vector<SharedStream>& streams, const SharedReadOptions& options,
      const std::function<bool(size_t stream, Batch&, bool deletes)>& emit,
      const std::function<bool(Position position, const std::vector<std::string>& table_ids)>&
          checkpoint) override {
    auto stopping = [&] { return options.follow && options.stopping && options.stopping(); };
    SharedRead out;
    if (streams.empty()) return out;
    std::vector<pg::ChangeTable> tables;
    std::vector<uint32_t> discovered;  // per table: its relation as discovered
    // Tables dropped and created again before this sync: the destination holds the old
    // relation's rows, whose changes still in the log are applied first.
    std::vector<size_t> replaced;
    // Per table: whose rows the destination holds (with a partitioned table's partitions), as
    // the checkpoints record it, and the table as discovered.
    std::vector<pg::TableIdentity> held;
    std::vector<pg::TableIdentity> found;
    pg::Lsn start = ~pg::Lsn{0};
    for (const auto& ss : streams) {
      FERRY_ASSIGN_OR_RETURN(pg::TableIdentity h, HeldIdentity(ss));
      FERRY_ASSIGN_OR_RETURN(pg::ChangeTable t, ChangeTableOf(ss, h));
      FERRY_ASSIGN_OR_RETURN(const Relation* rel, Find(*ss.info));
      if (t.relid != rel->oid) replaced.push_back(tables.size());
      discovered.push_back(rel->oid);
      held.push_back(std::move(h));
      FERRY_ASSIGN_OR_RETURN(pg::TableIdentity f, pg::TableIdentity::Parse(ss.info->table_id));
      found.push_back(std::move(f));
      start = std::min(start, t.position);
      tables.push_back(std::move(t));
    }
    FERRY_RETURN_IF_ERROR(CheckSlotFor(start));
    // Partitions that changed since the destination's rows were read: the read stops once the
    // log is read up to `repartitioned_at` (every change before the catalog was looked at).
    FERRY_ASSIGN_OR_RETURN(std::string repartitioned, ReviewPartitions(tables, found, &held));
    pg::Lsn repartitioned_at = 0;
    // The insert position: everything committed so far is before it (the write position can
    // lag behind commits when synchronous_commit is off). Every change of a replaced table's old
    // relation is before it too.
    pg::Lsn log_end = ~pg::Lsn{0};
    if (!options.follow || !replaced.empty() || !repartitioned.empty()) {
      FERRY_ASSIGN_OR_RETURN(log_end, LogEnd(conn_.get()));
      repartitioned_at = log_end;
    }
    const pg::Lsn target = options.follow ? ~pg::Lsn{0} : log_end;  // following: no end
    if (log_end <= start && !replaced.empty() && !cdc_.ignore_truncate) {
      return ReplacedError(tables[replaced.front()], discovered[replaced.front()], start);
    }
    if (log_end <= start && !repartitioned.empty()) {
      return RepartitionedError(repartitioned, start);
    }
    if (target <= start) return out;  // nothing was written since

    if (!repl_) {
      FERRY_ASSIGN_OR_RETURN(repl_, PgConnection::Connect(cdc_.dsn, {.replication = true}));
    }
    int v = repl_->ServerVersion();
    std::string proto = v >= 160000 ? "4" : v >= 150000 ? "3" : "2";
    FERRY_RETURN_IF_ERROR(repl_->StartCopyBoth("START_REPLICATION SLOT " + cdc_.slot + " LOGICAL " +
                                               pg::FormatLsn(start) + " (proto_version '" + proto +
                                               "', publication_names '\"" + cdc_.publication +
                                               "\"', binary 'true', streaming 'on')"));
    streaming_ = true;
    FERRY_LOG(kInfo) << "reading changes from slot " << cdc_.slot << " from "
                     << pg::FormatLsn(start)
                     << (options.follow ? std::string(" on, until stopped")
                                        : " up to " + pg::FormatLsn(target));
    StartReader(start);

    pg::ChangeSet changes(std::move(tables));
    changes.set_ignore_truncate(cdc_.ignore_truncate);
    pg::Lsn boundary = start;  // every transaction before it was received
    int64_t row_changes = 0;
    // A followed table dropped or renamed since it was discovered: the read ends once the log is
    // read up to `gone_at` (every change before the drop), for a rediscovery.
    std::string gone;
    pg::Lsn gone_at = 0;
    std::unique_ptr<ChangeSpill> spill;
    if (options.memory_limit > 0 && !options.spill_dir.empty()) {
      spill = std::make_unique<ChangeSpill>(options.spill_dir, "temp_dir");
      changes.SetSpill(spill.get(), options.memory_limit);
    }
    auto resolve = [&](size_t t, const std::vector<std::vector<std::string>>& keys,
                       std::vector<pg::ChangeSet::Row>* rows) {
      return LookupRows(changes, t, keys, rows);
    };
    auto flush = [&](pg::Lsn position) -> Status {
      FERRY_RETURN_IF_ERROR(changes.TakeBatches(options.batch_rows, emit, resolve));
      std::vector<std::string> ids;
      for (size_t i = 0; i < changes.tables().size(); ++i) {
        // A table followed as another relation since (source.truncate: ignore).
        const uint32_t relid = changes.tables()[i].relid;
        if (held[i].relid != relid)
          held[i] = found[i].relid == relid ? found[i] : pg::TableIdentity{relid};
        ids.push_back(held[i].ToString());
      }
      if (!checkpoint(Position::Lsn(position), ids)) {
        return Status::Cancelled("sync stopped");
      }
      out.position = Position::Lsn(position);
      if (options.trigger) options.trigger->Taken();
      if (gone.empty()) {
        FERRY_ASSIGN_OR_RETURN(gone, GoneSinceDiscovery(changes.tables(), discovered));
        if (!gone.empty()) {
          FERRY_ASSIGN_OR_RETURN(gone_at, LogEnd(lookup_.get()));
        }
      }
      if (repartitioned.empty()) {
        FERRY_ASSIGN_OR_RETURN(std::vector<pg::TableIdentity> now, PartitionsNow(held));
        FERRY_ASSIGN_OR_RETURN(repartitioned, ReviewPartitions(changes.tables(), now, &held));
        if (!repartitioned.empty()) {
          FERRY_ASSIGN_OR_RETURN(repartitioned_at, LogEnd(lookup_.get()));
        }
      }
      return Status::OK();
    };
    auto due = [&](bool quiet, int64_t commit_time_us = 0) {
      if (!options.trigger) return false;
      return options.trigger->Due({changes.pending_changes(), changes.pending_bytes(),
                                   boundary > out.position.lsn(), quiet, commit_time_us});
    };
    Status result;
    // At a transaction boundary: true when the read ends here (`result` says how).
    auto ends_here = [&] {
      if (!replaced.empty() && boundary >= log_end) {
        // Every change of the replaced tables' old relations is in.
        if (!cdc_.ignore_truncate) {
          result = flush(boundary);
          if (result.ok()) {
            result = ReplacedError(changes.tables()[replaced.front()], discovered[replaced.front()],
                                   boundary);
          }
          return true;
        }
        for (size_t i : replaced) Adopt(&changes, i, discovered[i]);
        replaced.clear();
      }
      if (!repartitioned.empty() && boundary >= repartitioned_at) {
        result = flush(boundary);
        if (result.ok()) result = RepartitionedError(repartitioned, boundary);
        return true;
      }
      if (boundary >= target) {
        result = flush(boundary);
        if (result.ok() && !gone.empty()) out.restart = gone;
        return true;
      }
      if (!gone.empty() && boundary >= gone_at) {
        result = flush(boundary);
        out.restart = gone;
        return true;
      }
      if (stopping()) {
        result = Status::Cancelled("stop requested");
        return true;
      }
      return false;
    };
    pg::PgOutputMessage m;
    std::vector<StreamItem> batch;
    size_t next = 0;
    for (;;) {
      if (next == batch.size()) {
        auto got = items_->Receive();
        if (!got) {
          result = Status::Cancelled("the replication reader stopped");
          break;
        }
        batch = std::move(*got);
        next = 0;
        if (batch.empty()) continue;
      }
      const StreamItem* item = &batch[next++];
      if (item->kind == StreamItem::kError) {
        result = item->error;
        break;
      }
      if (item->kind == StreamItem::kKeepalive) {
        if (changes.in_transaction()) continue;
        boundary = std::max(boundary, item->wal_end);
        if (ends_here()) break;
        // Following a quiet log (or one whose changes are all filtered out): the positions
        // still move on, so that the slot does not hold WAL back. A checkpoint another source
        // waits for is taken here too.
        if (due(/*quiet=*/true)) {
          result = flush(boundary);
          if (!result.ok()) break;
        }
        continue;
      }
      Status ps = pg::ParsePgOutput(item->payload, &m, changes.in_stream());
      if (!ps.ok()) {
        result = ps.WithContext("slot " + cdc_.slot);
        break;
      }
      if ((m.type == 'I' || m.type == 'U' || m.type == 'D') && (++row_changes & 1023) == 0) {
        FaultPoint("source.mid_transaction");
      }
      std::string detail;
      Status stop;
      auto next_step = ApplySettled(&changes, m, boundary, &detail, &stop);
      if (!next_step.ok()) {
        result = next_step.status();
        break;
      }
      if (*next_step != Next::kGoOn) {
        // Stop before this transaction: what came before it lands, then the caller decides.
        changes.DropTransaction();
        result = flush(boundary);
        if (!result.ok()) break;
        if (*next_step == Next::kRediscover) {
          out.restart = detail;
          FERRY_LOG(kInfo) << detail << " (in the transaction after " << pg::FormatLsn(boundary)
                           << "): rediscovering the table before going on";
        } else {
          result = stop;
        }
        break;
      }
      if (m.type == 'C' || m.type == 'c') {
        boundary = changes.last_commit_end();
        if (ends_here()) break;
        if (due(/*quiet=*/false, m.commit_time_us)) {
          result = flush(boundary);
          if (!result.ok()) break;
        }
      }
    }
    StopReader();
    if (!result.ok()) return result;
    return out;
  }

  // Looks into the slot without consuming it (pg_logical_slot_peek_binary_changes, read through
  // a cursor, up to kPeekChanges messages) for a change of the stream's table (a relation of its
  // name) committed at or after `position`.
  Result<PendingChanges> SharedLogPending(const StreamInfo& stream, Position position) override {
    FERRY_ASSIGN_OR_RETURN(const Relation* rel, Find(stream));
    FERRY_RETURN_IF_ERROR(OpenLookup());
    PendingChanges out;
    FERRY_ASSIGN_OR_RETURN(pg::Lsn end, LogEnd(lookup_.get()));
    out.log_end = Position::Lsn(end);
    const pg::Lsn at = position.lsn();
    if (end <= at) {
      out.kind = PendingChanges::Kind::kNone;
      out.detail = "nothing was written to the log after it";
      return out;
    }
    FERRY_ASSIGN_OR_RETURN(auto slot, SlotRow());
    if (slot.rows() == 0) {
      out.detail = "replication slot " + cdc_.slot + " does not exist";
      return out;
    }
    FERRY_ASSIGN_OR_RETURN(pg::Lsn confirmed, pg::ParseLsn(slot.Text(0, 2)));
    if (confirmed > at) {
      out.detail =
          "replication slot " + cdc_.slot + " starts past it, at " + pg::FormatLsn(confirmed);
      return out;
    }
    // Decoding reads flushed WAL only, and with synchronous_commit off the last commits are
    // flushed a moment later (wal_writer_delay): wait for the flush to reach `end`.
    for (int waited_ms = 0;; waited_ms += 100) {
      FERRY_ASSIGN_OR_RETURN(auto f, lookup_->Query("SELECT pg_is_in_recovery() OR "
                                                    "pg_current_wal_flush_lsn() >= $1::pg_lsn",
                                                    {pg::FormatLsn(end)}));
      if (f.Bool(0, 0)) break;
      if (waited_ms >= 5000) {
        out.detail = "the server has not flushed its log up to " + pg::FormatLsn(end);
        return out;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    auto unknown = [&](const Status& s) {
      out.detail = "the log could not be looked into: " + s.message();
      (void)lookup_->Exec("ROLLBACK");
      return out;
    };
    FERRY_ASSIGN_OR_RETURN(std::string slot_lit, lookup_->Literal(cdc_.slot));
    FERRY_ASSIGN_OR_RETURN(std::string pub_lit, lookup_->Literal("\"" + cdc_.publication + "\""));
    Status s = lookup_->Exec("BEGIN READ ONLY");
    if (s.ok()) {
      s = lookup_->Exec(
          "DECLARE ferry_peek NO SCROLL CURSOR FOR SELECT data FROM "
          "pg_logical_slot_peek_binary_changes(" +
          slot_lit + ", '" + pg::FormatLsn(end) + "'::pg_lsn, " + std::to_string(kPeekChanges) +
          ", 'proto_version', '1', 'publication_names', " + pub_lit + ")");
    }
    if (!s.ok()) return unknown(s);
    std::set<uint32_t> relids;  // relations of the table's name
    pg::Lsn commit = 0;         // of the transaction being read
    size_t seen = 0;
    pg::PgOutputMessage m;
    for (;;) {
      auto rows = lookup_->QueryBinary("FETCH 1000 FROM ferry_peek", {});
      if (!rows.ok()) return unknown(rows.status());
      if (rows->rows() == 0) break;
      for (int i = 0; i < rows->rows(); ++i, ++seen) {
        if (!pg::ParsePgOutput(rows->Bytes(i, 0), &m).ok()) continue;
        bool hit = false;
        if (m.type == 'R' && m.nspname == rel->schema && m.relname == rel->table) {
          relids.insert(m.relid);
        } else if (m.type == 'B') {
          commit = m.lsn;
        } else if (m.type == 'I' || m.type == 'U' || m.type == 'D') {
          hit = relids.count(m.relid) > 0;
        } else if (m.type == 'T') {
          for (uint32_t r : m.truncated) hit = hit || relids.count(r) > 0;
        }
        // A transaction whose commit record starts before the position is in the table.
        if (hit && commit >= at) {
          (void)lookup_->Exec("ROLLBACK");
          out.kind = PendingChanges::Kind::kSome;
          out.detail = "a change of it committed at " + pg::FormatLsn(commit);
          return out;
        }
      }
    }
    FERRY_RETURN_IF_ERROR(lookup_->Exec("COMMIT"));
    if (seen >= kPeekChanges) {
      out.detail = "more than " + std::to_string(kPeekChanges) + " changes are in the log";
      return out;
    }
    out.kind = PendingChanges::Kind::kNone;
    out.detail = "none of the log's changes up to " + pg::FormatLsn(end) + " is of it";
    return out;
  }

  Result<std::unique_ptr<LogWatch>> OpenLogWatch() override {
    FERRY_ASSIGN_OR_RETURN(auto conn, PgConnection::Connect(cdc_.dsn));
    return std::unique_ptr<LogWatch>(new PgLogWatch(std::move(conn), cdc_));
  }

  // Sent by the reader thread with its next status update.
  void ConfirmSharedLog(Position position) override {
    pg::Lsn lsn = position.lsn();
    pg::Lsn was = confirmed_.load(std::memory_order_acquire);
    while (lsn > was && !confirmed_.compare_exchange_weak(was, lsn, std::memory_order_acq_rel)) {
    }
  }

  Status AcknowledgeSharedLog(Position position) override {
    if (!repl_ || !streaming_) return Status::OK();
    FaultPoint("source.before_acknowledge");
    pg::Lsn lsn = position.lsn();
    FERRY_RETURN_IF_ERROR(repl_->PutCopyData(pg::StandbyStatusUpdate(lsn, lsn, true)));
    // The server answers the request with a keepalive once it has taken the position.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    std::string buf;
    while (std::chrono::steady_clock::now() < deadline) {
      FERRY_ASSIGN_OR_RETURN(int got, repl_->ReadCopyData(&buf, 200));
      if (got < 0) break;
      if (got == 0) continue;
      pg::ReplicationFrame f;
      if (pg::ParseReplicationFrame(buf, &f).ok() && f.kind == 'k') break;
    }
    FERRY_LOG(kInfo) << "slot " << cdc_.slot << " acknowledged up to " << pg::FormatLsn(lsn);
    repl_.reset();
    streaming_ = false;
    return Status::OK();
  }

  std::string Describe() const override {
    return conn_->Describe() +
           " (full refresh and incremental windows: every table read in one REPEATABLE READ "
           "snapshot, a consistent point, shared by the parallel readers; cdc: logical "
           "replication slot " +
           cdc_.slot + ", publication " + cdc_.publication + ")";
  }

 private:
  struct CursorColumn {
    size_t index = 0;
    pg::CursorSupport support;
  };

  // The columns of a COPY (ctid first for heap relations, so that a value error names its row,
  // unless the user may read some columns only).
  static std::string SelectList(const Relation& rel, const StreamInfo& stream,
                                std::vector<CopyField>* fields) {
    std::string sql;
    if (rel.Heap() && rel.whole) {
      sql += "ctid";
      fields->push_back(CopyField{"ctid", PgWire::kTid, -1});
    }
    for (size_t i = 0; i < stream.columns.size(); ++i) {
      sql += (fields->empty() ? "" : ", ") + QuoteIdent(stream.columns[i].name);
      fields->push_back(CopyField{stream.columns[i].name, rel.wires[TableOrdinal(stream, i)],
                                  static_cast<int>(i)});
    }
    return sql;
  }

  // ONLY: rows of inheritance children are their own streams (and their ctids overlap).
  static constexpr std::string_view kPartitionsKey = "partitions:";

  // The leaf partitions of a partitioned table, quoted and qualified, in name order.
  Result<std::vector<std::string>> Partitions(const Relation& rel) {
    FERRY_ASSIGN_OR_RETURN(
        auto r, conn_->Query("SELECT n.nspname, c.relname FROM pg_partition_tree($1::oid) t"
                             " JOIN pg_class c ON c.oid = t.relid"
                             " JOIN pg_namespace n ON n.oid = c.relnamespace"
                             " WHERE t.isleaf ORDER BY n.nspname, c.relname",
                             {std::to_string(rel.oid)}));
    std::vector<std::string> out;
    for (int i = 0; i < r.rows(); ++i) {
      out.push_back(QuoteIdent(r.Text(i, 0)) + "." + QuoteIdent(r.Text(i, 1)));
    }
    return out;
  }

  // "partitions:<n>:<FNV-1a of the list>": what a plan of one chunk per partition was made of.
  static std::string PartitionsKey(const std::vector<std::string>& leaves) {
    uint64_t h = 14695981039346656037ull;
    for (const auto& leaf : leaves) {
      for (char c : leaf + "\n") {
        h ^= static_cast<uint8_t>(c);
        h *= 1099511628211ull;
      }
    }
    char buf[24];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return std::string(kPartitionsKey) + std::to_string(leaves.size()) + ":" + buf;
  }

  static std::string From(const Relation& rel) {
    return std::string(rel.Heap() ? "ONLY " : "") + rel.Qualified();
  }

  static std::string Candidates(const StreamInfo& stream) {
    std::string out;
    for (const auto& n : stream.cursor_candidates) out += (out.empty() ? "" : ", ") + n;
    return out.empty() ? std::string("none") : out;
  }

  Result<CursorColumn> CheckCursor(const StreamInfo& stream, const Relation& rel,
                                   const std::string& cursor) const {
    for (size_t i = 0; i < stream.columns.size(); ++i) {
      if (stream.columns[i].name != cursor || TableOrdinal(stream, i) >= rel.bases.size()) {
        continue;
      }
      CursorColumn cc{i, pg::ClassifyCursor(rel.bases[TableOrdinal(stream, i)])};
      if (cc.support.kind == pg::CursorSupport::Kind::kRefused) {
        return Status::InvalidArgument(
            "table " + rel.Display() + ": column " + cursor + " (" + stream.columns[i].source_type +
            ") cannot be the cursor: " + cc.support.why +
            "; pick a column of integers, numeric, dates, timestamps, text or uuid whose value "
            "grows when a row changes (candidates: " +
            Candidates(stream) + ")");
      }
      return cc;
    }
    return Status::InvalidArgument("table " + rel.Display() + " has no column '" + cursor +
                                   "' for the cursor; candidates: " + Candidates(stream) +
                                   " (names are matched exactly, case included)");
  }

  // A window bound (from the state file or the marker) as a quoted literal cast to the column's
  // base type: COPY takes no parameters. Only the JSON kind MaxCursor gives for the column is
  // accepted; the text is quoted by PQescapeLiteral, never pasted.
  Result<std::string> CursorLiteral(const Relation& rel, const std::string& cursor,
                                    const CursorColumn& cc, const nlohmann::json& v) const {
    const bool integer = cc.support.kind == pg::CursorSupport::Kind::kInteger;
    std::string text;
    if (integer && v.is_number_unsigned()) {
      text = std::to_string(v.get<uint64_t>());
    } else if (integer && v.is_number_integer()) {
      text = std::to_string(v.get<int64_t>());
    } else if (!integer && v.is_string()) {
      text = v.get<std::string>();
    } else {
      return Status::InvalidArgument(
          "table " + rel.Display() + ": cursor value " + v.dump().substr(0, 200) +
          " (from the state file or the table's marker) is not a " +
          (integer ? "JSON integer" : "JSON string") + " as values of column " + cursor + " (" +
          cc.support.cast +
          ") are; did the column's type change? Put the old type back, or "
          "start the stream over (remove it from the state file and drop its Iceberg table)");
    }
    FERRY_ASSIGN_OR_RETURN(std::string lit, conn_->Literal(text));
    return lit + "::" + cc.support.cast;
  }

  // Streams a COPY through the decoder into batches (see BatchFull).
  Status CopyInto(const Relation& rel, const std::string& sql, std::vector<CopyField> fields,
                  std::shared_ptr<const Schema> schema, size_t batch_rows,
                  const std::function<bool(Batch&)>& emit) {
    CopyBinaryDecoder decoder(std::move(fields));
    Batch batch(std::move(schema));
    int64_t rows_seen = 0;
    Status s = conn_->CopyOut(sql, [&](std::string_view data) -> Status {
      FERRY_RETURN_IF_ERROR(decoder.Feed(data, &batch));
      for (; rows_seen < decoder.rows(); ++rows_seen) {
        if (((rows_seen + 1) & 1023) == 0) FaultPoint("source.mid_chunk");
      }
      if (BatchFull(batch, batch_rows)) {
        if (!emit(batch)) return Status::Cancelled("sync stopped");
        batch.Clear();
      }
      return Status::OK();
    });
    if (s.ok()) s = decoder.Finish();
    if (!s.ok()) {
      if (s.code() == StatusCode::kPermissionDenied) {
        return Status::PermissionDenied("reading " + rel.Display() + ": " + s.message() +
                                        "; grant SELECT on " + rel.Qualified() + " to " +
                                        QuoteIdent(conn_->User()));
      }
      if (s.code() == StatusCode::kCancelled) return s;
      return Status(s.code(), "table " + rel.Display() + ", " + s.message());
    }
    if (batch.num_rows() > 0 && !emit(batch)) return Status::Cancelled("sync stopped");
    return Status::OK();
  }

  // ---- logical replication helpers ----

  // What a pgoutput message that ChangeSet::Apply reported an event for leads to.
  enum class Next {
    kGoOn,        // applied (or the event needs nothing)
    kRediscover,  // stop before the transaction; the next round rediscovers the table
    kStop,        // stop before the transaction, with an error
  };

  // The followed table of a shared stream: columns, key, position, and the relation whose
  // changes its destination holds (`held`, HeldIdentity).
  Result<pg::ChangeTable> ChangeTableOf(const SharedStream& ss, const pg::TableIdentity& held) {
    FERRY_ASSIGN_OR_RETURN(const Relation* rel, Find(*ss.info));
    pg::ChangeTable t;
    t.stream = ss.info->name;
    t.nspname = rel->schema;
    t.relname = rel->table;
    // The stream's columns (all of the table's, or those its transforms read); the others are
    // skipped in every change.
    std::vector<bool> read(rel->names.size(), false);
    for (size_t i = 0; i < ss.info->columns.size(); ++i) {
      const size_t c = TableOrdinal(*ss.info, i);
      if (c >= rel->wires.size()) {
        return Status::Internal("stream " + ss.info->name + " does not match its table");
      }
      t.columns.push_back(ss.info->columns[i].name);
      t.wires.push_back(rel->wires[c]);
      t.type_oids.push_back(rel->type_oids[c]);
      read[c] = true;
    }
    for (size_t c = 0; c < rel->names.size(); ++c) {
      if (!read[c]) t.ignored.push_back(rel->names[c]);
    }
    for (const auto& k : ss.info->primary_key) {
      for (size_t i = 0; i < t.columns.size(); ++i) {
        if (t.columns[i] == k) t.key.push_back(i);
      }
    }
    t.schema = ss.schema;
    t.position = ss.position.lsn();
    t.relid = held.relid;
    t.since = ss.table_since.lsn();
    return t;
  }

  // Whose rows the destination holds of the stream's table: the table (and partitions) of its
  // progress; a record of older ferry, which listed no partitions, is taken to hold those of now.
  static Result<pg::TableIdentity> HeldIdentity(const SharedStream& ss) {
    FERRY_ASSIGN_OR_RETURN(pg::TableIdentity now, pg::TableIdentity::Parse(ss.info->table_id));
    if (ss.table_id.empty()) return now;
    auto held = pg::TableIdentity::Parse(ss.table_id);
    if (!held.ok()) return held.status().WithContext("stream " + ss.info->name);
    if (held->relid == now.relid && !held->partitioned) return now;
    return held;
  }

  // How far the log reaches: the insert position (the replay position on a standby).
  static Result<pg::Lsn> LogEnd(PgConnection* conn) {
    FERRY_ASSIGN_OR_RETURN(auto now, conn->Query("SELECT (CASE WHEN pg_is_in_recovery() THEN "
                                                 "pg_last_wal_replay_lsn() ELSE "
                                                 "pg_current_wal_insert_lsn() END)::text"));
    return pg::ParseLsn(now.Text(0, 0));
  }

  static std::string Replaced(const pg::ChangeTable& t, uint32_t now) {
    return "table " + t.nspname + "." + t.relname +
           " was dropped and created again on the source (the destination holds the rows of "
           "relation " +
           std::to_string(t.relid) + "; the table is relation " + std::to_string(now) + " now)";
  }
  static constexpr std::string_view kReplacedFix =
      "To follow the new table: start the stream over (remove its entry from the state file: a "
      "new backfill replaces the table), or set source.truncate: ignore to keep the destination's "
      "rows and apply the new table's changes from here on";

  // The stop at a table dropped and created again: every change of the old one up to `at` is in.
  static Status ReplacedError(const pg::ChangeTable& t, uint32_t now, pg::Lsn at) {
    return Status::InvalidArgument(Replaced(t, now) + "; every change of the old table (up to " +
                                   pg::FormatLsn(at) + ") is applied. " +
                                   std::string(kReplacedFix));
  }

  static constexpr std::string_view kRepartitionedFix =
      "To follow the table as it is now: start the stream over (remove its entry from the state "
      "file: a new backfill replaces the table), or set source.truncate: ignore to keep the "
      "destination's rows as they are and apply the partitions' changes from here on";

  static Status RepartitionedError(const std::string& what, pg::Lsn at) {
    return Status::InvalidArgument(what + "; every change up to " + pg::FormatLsn(at) +
                                   " is applied. " + std::string(kRepartitionedFix));
  }

  // The partitions of each partitioned table in `held` now (the others as they are).
  Result<std::vector<pg::TableIdentity>> PartitionsNow(const std::vector<pg::TableIdentity>& held) {
    std::vector<pg::TableIdentity> now = held;
    for (auto& id : now) {
      if (!id.partitioned) continue;
      FERRY_RETURN_IF_ERROR(OpenLookup());
      FERRY_ASSIGN_OR_RETURN(id.leaves, pg::LeafPartitions(lookup_.get(), id.relid));
    }
    return now;
  }

  // Compares the partitions whose rows the destination holds (`held`) with those of `now`:
  // partitions that joined holding only rows written since are followed from here on (and so are
  // any changes under source.truncate: ignore, with a warning); otherwise the sentence that says
  // what the destination lacks or has too many of, for the stop.
  Result<std::string> ReviewPartitions(const std::vector<pg::ChangeTable>& tables,
                                       const std::vector<pg::TableIdentity>& now,
                                       std::vector<pg::TableIdentity>* held) {
    for (size_t i = 0; i < tables.size(); ++i) {
      pg::TableIdentity& h = (*held)[i];
      if (!h.partitioned || !now[i].partitioned || h.relid != now[i].relid ||
          h.leaves == now[i].leaves) {
        continue;
      }
      const std::string display = tables[i].nspname + "." + tables[i].relname;
      FERRY_RETURN_IF_ERROR(OpenLookup());
      FERRY_ASSIGN_OR_RETURN(std::string diverge,
                             pg::PartitionsDiverge(lookup_.get(), display, h, now[i]));
      if (!diverge.empty() && !cdc_.ignore_truncate) return diverge;
      if (diverge.empty()) {
        FERRY_LOG(kInfo) << "the partitions of " << display
                         << " changed: every partition that joined it holds only rows written "
                            "since, whose changes are in the log; they are followed";
      } else {
        FERRY_LOG(kWarn) << diverge
                         << " (source.truncate: ignore): the destination keeps the rows it holds, "
                            "and the partitions' changes are applied from here on";
      }
      h = now[i];
    }
    return std::string();
  }

  // source.truncate: ignore: the table's changes are those of `relid` from here on.
  static void Adopt(pg::ChangeSet* changes, size_t table, uint32_t relid) {
    const pg::ChangeTable& t = changes->tables()[table];
    if (t.relid == relid) return;
    FERRY_LOG(kWarn) << Replaced(t, relid)
                     << " (source.truncate: ignore): the destination keeps the old table's rows, "
                        "and the new table's changes are applied from here on";
    changes->AdoptRelation(table, relid);
  }

  Status OpenLookup() {
    if (!lookup_) {
      FERRY_ASSIGN_OR_RETURN(lookup_, PgConnection::Connect(cdc_.dsn));
    }
    return Status::OK();
  }

  // The OID of the relation named `nspname`.`relname` now; 0 when there is none.
  Result<uint32_t> CurrentRelid(const std::string& nspname, const std::string& relname) {
    FERRY_RETURN_IF_ERROR(OpenLookup());
    FERRY_ASSIGN_OR_RETURN(auto r, lookup_->Query("SELECT c.oid::int8 FROM pg_class c JOIN "
                                                  "pg_namespace n ON n.oid = c.relnamespace "
                                                  "WHERE n.nspname = $1 AND c.relname = $2",
                                                  {nspname, relname}));
    return r.rows() == 0 ? 0u : static_cast<uint32_t>(r.Int64(0, 0));
  }

  // The first followed table whose discovered relation no longer has its name (dropped, renamed,
  // or dropped and created again since discovery), as a sentence; empty when there is none.
  Result<std::string> GoneSinceDiscovery(const std::vector<pg::ChangeTable>& tables,
                                         const std::vector<uint32_t>& discovered) {
    FERRY_RETURN_IF_ERROR(OpenLookup());
    std::string oids;
    for (uint32_t oid : discovered) oids += (oids.empty() ? "" : ",") + std::to_string(oid);
    FERRY_ASSIGN_OR_RETURN(
        auto r, lookup_->Query("SELECT c.oid::int8, n.nspname, c.relname FROM pg_class c JOIN "
                               "pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = "
                               "ANY ($1::oid[])",
                               {"{" + oids + "}"}));
    std::map<uint32_t, std::pair<std::string, std::string>> named;
    for (int i = 0; i < r.rows(); ++i) {
      named[static_cast<uint32_t>(r.Int64(i, 0))] = {r.Text(i, 1), r.Text(i, 2)};
    }
    for (size_t i = 0; i < tables.size(); ++i) {
      auto it = named.find(discovered[i]);
      if (it != named.end() && it->second.first == tables[i].nspname &&
          it->second.second == tables[i].relname) {
        continue;
      }
      return "table " + tables[i].nspname + "." + tables[i].relname + " (relation " +
             std::to_string(discovered[i]) +
             ") was dropped or renamed on the source while its changes were read";
    }
    return std::string();
  }

  // Applies `m`, settling what the change set reports (columns that differ, a TRUNCATE, another
  // relation of a followed table's name) until it is applied or the read must stop before its
  // transaction (`detail` names the table; kStop: `stop` is the error).
  Result<Next> ApplySettled(pg::ChangeSet* changes, const pg::PgOutputMessage& m, pg::Lsn boundary,
                            std::string* detail, Status* stop) {
    // Each event is settled once, and a message raises at most one of each kind.
    for (int tries = 0; tries < 4; ++tries) {
      pg::ChangeEvent event = pg::ChangeEvent::kNone;
      FERRY_RETURN_IF_ERROR(changes->Apply(m, &event, detail));
      switch (event) {
        case pg::ChangeEvent::kNone:
          return Next::kGoOn;
        case pg::ChangeEvent::kTruncated:
          if (cdc_.ignore_truncate) {
            FERRY_LOG(kWarn)
                << "TRUNCATE of " << *detail
                << " ignored (source.truncate: ignore): the destination keeps the rows";
            return Next::kGoOn;  // a streamed transaction's commit still counts
          }
          *stop = Status::InvalidArgument(
              "table " + *detail + " was truncated on the source (in the transaction after " +
              pg::FormatLsn(boundary) +
              "); the changes before it are applied. To follow: start the stream over (remove "
              "its entry from the state file and drop its table in the destination, so that a "
              "new backfill loads it), or set source.truncate: ignore to keep the destination's "
              "rows");
          return Next::kStop;
        case pg::ChangeEvent::kSchemaChanged: {
          FERRY_ASSIGN_OR_RETURN(Next next, SettleSchemaChange(changes, boundary, stop));
          if (next != Next::kGoOn) return next;
          break;  // told how to take the columns: apply again
        }
        case pg::ChangeEvent::kRecreated: {
          FERRY_ASSIGN_OR_RETURN(Next next, SettleRecreated(changes, boundary, stop));
          if (next != Next::kGoOn) return next;
          break;
        }
      }
    }
    return Status::Internal("a change of " + *detail + " could not be settled");
  }

  // A relation message whose columns the discovered table lacks, or has with another type: the
  // table changed since discovery (rediscover), or this part of the log is older than the
  // discovered definition: columns dropped since are ignored, and values of a column's older
  // type are widened to its type now when they fit it exactly (else the read stops).
  Result<Next> SettleSchemaChange(pg::ChangeSet* changes, pg::Lsn boundary, Status* stop) {
    const pg::ChangeSet::SchemaChange sc = changes->schema_change();
    const pg::ChangeTable& t = changes->tables()[sc.table];
    FERRY_ASSIGN_OR_RETURN(auto current, CurrentColumns(sc.relid));
    // A relation no longer in the catalog (dropped since) has only its relation message to tell
    // its columns: no rediscovery would tell more.
    const bool gone = current.empty();
    bool rediscover = false;
    std::vector<std::string> dropped;
    for (const auto& name : sc.unknown_columns) {
      if (current.count(name)) {
        rediscover = true;
      } else {
        dropped.push_back(name);
      }
    }
    std::vector<std::pair<const pg::ChangeSet::Retyped*, pg::PgWire>> older;
    for (const auto& r : sc.retyped) {
      const size_t i = static_cast<size_t>(std::find(t.columns.begin(), t.columns.end(), r.column) -
                                           t.columns.begin());
      auto it = current.find(r.column);
      if (!gone && (it == current.end() || it->second != t.type_oids[i])) {
        rediscover = true;  // the column changed since discovery
        continue;
      }
      // The catalog has the discovered type: this part of the log is older than it.
      FERRY_ASSIGN_OR_RETURN(pg::PgBaseType base, BaseType(r.type_oid, r.typmod));
      const pg::PgMapping mapped = pg::MapPgType(base, r.column);
      if (mapped.error.empty() && pg::PgWireWidens(mapped.wire, t.wires[i])) {
        older.emplace_back(&r, mapped.wire);
        continue;
      }
      FERRY_ASSIGN_OR_RETURN(
          auto named, lookup_->Query("SELECT format_type($1::oid, $2::int4)",
                                     {std::to_string(r.type_oid), std::to_string(r.typmod)}));
      const ColumnInfo* now = ColumnOf(t.stream, r.column);
      *stop = Status::NotSupported(
          "table " + t.nspname + "." + t.relname + ": column " + r.column + " is " +
          named.Text(0, 0) + " in the changes after " + pg::FormatLsn(boundary) + " and " +
          (now ? now->source_type + " (" + now->type.ToIceberg() + ")" : std::string("other")) +
          " now: its older values cannot be kept exactly in the new type, so the changes "
          "before them are applied and the stream stops. To go on: start the stream over (drop "
          "its table in the destination and remove its entry from the state file: a new "
          "backfill loads it with the new type)");
      return Next::kStop;
    }
    if (rediscover) return Next::kRediscover;
    changes->AllowDroppedColumns(sc.relid, dropped);
    for (const auto& [r, wire] : older) {
      FERRY_LOG(kInfo) << "table " << t.nspname << "." << t.relname << ": changes after "
                       << pg::FormatLsn(boundary) << " are of column " << r->column
                       << "'s older type (oid " << r->type_oid << "), widened to its type now";
      changes->DecodeOlderType(sc.relid, r->column, r->type_oid, wire);
    }
    return Next::kGoOn;
  }

  // A change of a relation named as a followed table, other than the relation whose rows the
  // destination holds. When that relation still has the name, the other one is an older table
  // (dropped or renamed before the destination's rows were read): its changes are skipped.
  // Otherwise the table was dropped and created again: stop (or, ignoring, follow the new one).
  Result<Next> SettleRecreated(pg::ChangeSet* changes, pg::Lsn boundary, Status* stop) {
    const pg::ChangeSet::Recreated rc = changes->recreated();
    const pg::ChangeTable& t = changes->tables()[rc.table];
    FERRY_ASSIGN_OR_RETURN(uint32_t now, CurrentRelid(t.nspname, t.relname));
    if (now == t.relid) {
      FERRY_LOG(kInfo) << "table " << t.nspname << "." << t.relname << ": changes of relation "
                       << rc.relid << " (an older table of that name) are skipped";
      changes->SkipRelation(rc.relid);
      return Next::kGoOn;
    }
    if (cdc_.ignore_truncate) {
      Adopt(changes, rc.table, rc.relid);
      return Next::kGoOn;
    }
    *stop = Status::InvalidArgument(
        Replaced(t, rc.relid) + " (in the transaction after " + pg::FormatLsn(boundary) +
        "); the changes before it are applied. " + std::string(kReplacedFix));
    return Next::kStop;
  }

  const ColumnInfo* ColumnOf(const std::string& stream, const std::string& column) const {
    for (const auto& st : cdc_streams_) {
      if (st.name != stream) continue;
      for (const auto& c : st.columns) {
        if (c.name == column) return &c;
      }
    }
    return nullptr;
  }

  // The publication exists and holds every cdc table (created or extended when not).
  Status EnsurePublication() {
    const std::string pub = QuoteIdent(cdc_.publication);
    FERRY_ASSIGN_OR_RETURN(
        auto p, conn_->Query("SELECT puballtables, pubinsert AND pubupdate AND pubdelete FROM "
                             "pg_publication WHERE pubname = $1",
                             {cdc_.publication}));
    auto denied = [&](const Status& s, const std::string& what) {
      if (s.code() != StatusCode::kPermissionDenied) return s;
      return Status::PermissionDenied(
          "cannot " + what + " publication " + cdc_.publication + ": " + s.message() +
          "; the tables' owner (or a superuser) can do it: CREATE PUBLICATION " + pub +
          " FOR TABLE ... WITH (publish_via_partition_root = true), then sync again");
    };
    if (p.rows() == 0) {
      std::string tables;
      for (const auto& st : cdc_streams_) {
        FERRY_ASSIGN_OR_RETURN(const Relation* rel, Find(st));
        tables += (tables.empty() ? "" : ", ") + rel->Qualified();
      }
      Status s = conn_->Exec("CREATE PUBLICATION " + pub + " FOR TABLE " + tables +
                             " WITH (publish_via_partition_root = true)");
      if (!s.ok()) return denied(s, "create");
      FERRY_LOG(kInfo) << "created publication " << cdc_.publication;
      return Status::OK();
    }
    if (!p.Bool(0, 1)) {
      return Status::InvalidArgument(
          "publication " + cdc_.publication +
          " does not publish every insert, update and delete; run ALTER PUBLICATION " + pub +
          " SET (publish = 'insert, update, delete, truncate')");
    }
    if (p.Bool(0, 0)) return Status::OK();  // FOR ALL TABLES
    for (const auto& st : cdc_streams_) {
      FERRY_ASSIGN_OR_RETURN(const Relation* rel, Find(st));
      FERRY_ASSIGN_OR_RETURN(
          auto in, conn_->Query("SELECT 1 FROM pg_publication_tables WHERE pubname = $1 AND "
                                "schemaname = $2 AND tablename = $3",
                                {cdc_.publication, rel->schema, rel->table}));
      if (in.rows() > 0) continue;
      Status s = conn_->Exec("ALTER PUBLICATION " + pub + " ADD TABLE " + rel->Qualified());
      if (!s.ok()) return denied(s, "add " + rel->Display() + " to");
      FERRY_LOG(kInfo) << "added " << rel->Display() << " to publication " << cdc_.publication;
    }
    return Status::OK();
  }

  // Creates the slot when missing (returning the name of the snapshot exported at its consistent
  // point) and records where this sync's new backfills start.
  Result<std::string> EnsureSlot() {
    FERRY_ASSIGN_OR_RETURN(auto r, SlotRow());
    if (r.rows() > 0) {
      FERRY_RETURN_IF_ERROR(CheckSlotRow(r));
      FERRY_ASSIGN_OR_RETURN(slot_start_, pg::ParseLsn(r.Text(0, 2)));
      slot_ready_ = true;
      return std::string();
    }
    if (!repl_) {
      FERRY_ASSIGN_OR_RETURN(repl_, PgConnection::Connect(cdc_.dsn, {.replication = true}));
    }
    auto created = repl_->SimpleQuery("CREATE_REPLICATION_SLOT " + cdc_.slot +
                                      " LOGICAL pgoutput EXPORT_SNAPSHOT");
    if (!created.ok()) {
      return created.status().WithContext("creating replication slot " + cdc_.slot +
                                          " (max_replication_slots may be exhausted)");
    }
    FERRY_ASSIGN_OR_RETURN(slot_start_, pg::ParseLsn(created->Text(0, 1)));
    slot_ready_ = true;
    FERRY_LOG(kInfo) << "created replication slot " << cdc_.slot << " at "
                     << pg::FormatLsn(slot_start_);
    return created->Text(0, 2);
  }

  Result<pg::PgResult> SlotRow() {
    return conn_->Query(
        "SELECT plugin, database, confirmed_flush_lsn::text, wal_status, slot_type, "
        "current_database() FROM pg_replication_slots WHERE slot_name = $1",
        {cdc_.slot});
  }

  Status CheckSlotRow(const pg::PgResult& r) {
    if (r.Text(0, 4) != "logical" || r.Text(0, 0) != "pgoutput" || r.Text(0, 1) != r.Text(0, 5)) {
      return Status::InvalidArgument(
          "replication slot " + cdc_.slot + " exists but is not a pgoutput slot of database " +
          r.Text(0, 5) + " (it is " + r.Text(0, 4) + ", plugin " + r.Text(0, 0) + ", database " +
          r.Text(0, 1) + "); set source.slot to another name");
    }
    if (r.Text(0, 3) == "lost") {
      return Status::InvalidArgument(
          "replication slot " + cdc_.slot +
          " was invalidated by the server (its WAL was removed, see max_slot_wal_keep_size): "
          "changes since the last sync are lost. To recover: drop the slot "
          "(SELECT pg_drop_replication_slot('" +
          cdc_.slot +
          "')), remove the cdc streams' "
          "entries from the state file, and sync: each table is backfilled again");
    }
    return Status::OK();
  }

  // Before reading from `start`: the slot must still hold every change after it.
  Status CheckSlotFor(pg::Lsn start) {
    FERRY_ASSIGN_OR_RETURN(auto r, SlotRow());
    auto lost = [&](const std::string& why) {
      return Status::InvalidArgument(
          "replication slot " + cdc_.slot + " " + why + ", so the changes after " +
          pg::FormatLsn(start) +
          " that ferry had not applied yet are lost. To recover: remove "
          "the cdc streams' entries from the state file and sync again: each table is "
          "backfilled anew (and the slot recreated)");
    };
    if (r.rows() == 0) return lost("no longer exists");
    // (A slot dropped since the last sync was created again by this sync, and starts later.)
    FERRY_RETURN_IF_ERROR(CheckSlotRow(r));
    FERRY_ASSIGN_OR_RETURN(pg::Lsn confirmed, pg::ParseLsn(r.Text(0, 2)));
    if (confirmed > start) {
      return lost("starts at " + pg::FormatLsn(confirmed) +
                  ": it no longer exists as ferry left it (it was dropped, and this sync created "
                  "it anew, or it was advanced by hand)");
    }
    return Status::OK();
  }

  // The replication session's reader thread: receives frames, answers keepalives and sends
  // status updates on time even while the decoder is blocked by slow sinks.
  void StartReader(pg::Lsn start) {
    // The reader runs ahead of the decoder by up to kReadAheadBytes of messages, so that the
    // server goes on decoding its WAL while the sinks commit a checkpoint (a commit into a SQL
    // destination takes seconds for a large batch).
    confirmed_.store(start, std::memory_order_release);
    items_ = std::make_unique<Channel<std::vector<StreamItem>>>(
        kReadAheadBytes / 1024, kReadAheadBytes, [](const std::vector<StreamItem>& items) {
          size_t bytes = 0;
          for (const auto& i : items) bytes += sizeof(StreamItem) + i.payload.capacity();
          return bytes;
        });
    stop_reader_ = false;
    reader_ = std::thread([this, start] {
      using Clock = std::chrono::steady_clock;
      constexpr size_t kBatch = 256;  // messages handed over at once: few thread switches
      pg::Lsn received = start;
      pg::Lsn flushed = start;  // as last told to the server
      auto last_status = Clock::now();
      auto last_probe = Clock::now();
      auto status = [&](bool reply) {
        last_status = Clock::now();
        flushed = std::max(flushed, confirmed_.load(std::memory_order_acquire));
        return repl_->PutCopyData(pg::StandbyStatusUpdate(received, flushed, reply));
      };
      // Due: every 10 s (wal_sender_timeout is 60 s by default), and at once when the sinks
      // have confirmed a checkpoint.
      auto status_due = [&] {
        return Clock::now() - last_status > std::chrono::seconds(10) ||
               confirmed_.load(std::memory_order_acquire) > flushed;
      };
      std::vector<StreamItem> pending;
      // Hands `pending` to the decoder, waiting for room without missing a status update.
      auto hand_over = [&]() -> Status {
        while (!pending.empty()) {
          auto sent = items_->SendFor(pending, std::chrono::milliseconds(200));
          if (sent != Channel<std::vector<StreamItem>>::SendResult::kTimedOut || stop_reader_) {
            pending.clear();
            break;
          }
          if (status_due()) FERRY_RETURN_IF_ERROR(status(false));
        }
        return Status::OK();
      };
      auto fail = [&](Status s) {
        StreamItem e;
        e.kind = StreamItem::kError;
        e.error = std::move(s);
        pending.push_back(std::move(e));
        std::vector<StreamItem> last = std::move(pending);
        items_->Send(std::move(last));
      };
      std::string buf;
      pg::ReplicationFrame f;
      while (!stop_reader_) {
        // While messages are waiting to be handed over, only take what is already here.
        auto got = repl_->ReadCopyData(&buf, pending.empty() ? 100 : 0);
        if (!got.ok()) return fail(got.status());
        if (*got < 0) {
          return fail(
              Status::Unavailable("the server ended the replication stream of slot " + cdc_.slot));
        }
        Status s;
        if (*got == 1) {
          s = pg::ParseReplicationFrame(buf, &f);
          if (!s.ok()) return fail(s);
          StreamItem item;
          if (f.kind == 'w') {
            received = std::max(received, f.wal_start);
            item.payload.assign(f.payload.data(), f.payload.size());
          } else if (f.kind == 'k') {
            received = std::max(received, f.wal_end);
            item.kind = StreamItem::kKeepalive;
            item.wal_end = f.wal_end;
            if (f.reply_requested) s = status(false);
          } else {
            continue;
          }
          bool keepalive = item.kind == StreamItem::kKeepalive;
          pending.push_back(std::move(item));
          if ((keepalive || pending.size() >= kBatch) && s.ok()) s = hand_over();
        } else if (!pending.empty()) {
          s = hand_over();  // nothing more right now
        } else if (Clock::now() - last_probe > std::chrono::milliseconds(500)) {
          // Quiet: ask for a keepalive, which tells how far the server has looked.
          last_probe = Clock::now();
          s = status(true);
        }
        if (s.ok() && status_due()) s = status(false);
        if (!s.ok()) return fail(s);
      }
    });
  }

  void StopReader() {
    if (!reader_.joinable()) return;
    stop_reader_ = true;
    items_->Close();
    reader_.join();
  }

  // The relation's columns as they are now (outside the sync's snapshot): name -> type oid.
  Result<std::map<std::string, uint32_t>> CurrentColumns(uint32_t relid) {
    FERRY_RETURN_IF_ERROR(OpenLookup());
    FERRY_ASSIGN_OR_RETURN(auto r, lookup_->Query("SELECT attname, atttypid FROM pg_attribute "
                                                  "WHERE attrelid = $1::oid AND attnum > 0 AND "
                                                  "NOT attisdropped",
                                                  {std::to_string(relid)}));
    std::map<std::string, uint32_t> out;
    for (int i = 0; i < r.rows(); ++i) out[r.Text(i, 0)] = static_cast<uint32_t>(r.Int64(i, 1));
    return out;
  }

  // The current rows of table `t` (an index into changes.tables()) for `keys` (key order, binary
  // send format), in order: what an unchanged TOASTed value the stream did not carry is read
  // from. nullopt for a key whose row no longer exists.
  Status LookupRows(const pg::ChangeSet& changes, size_t t,
                    const std::vector<std::vector<std::string>>& keys,
                    std::vector<pg::ChangeSet::Row>* out) {
    out->assign(keys.size(), std::nullopt);
    if (keys.empty()) return Status::OK();
    FERRY_RETURN_IF_ERROR(OpenLookup());
    const pg::ChangeTable& table = changes.tables()[t];
    // The rows are read from the table of that name: it must be the relation the changes are of.
    FERRY_ASSIGN_OR_RETURN(uint32_t now, CurrentRelid(table.nspname, table.relname));
    if (now != table.relid) {
      return Status::InvalidArgument(
          "table " + table.nspname + "." + table.relname + ": changes of relation " +
          std::to_string(table.relid) +
          " left large values unchanged (the server does not send them), and ferry reads such "
          "values from the table, which is no longer that relation (dropped, renamed, or "
          "dropped and created again). Start the stream over (remove its entry from the state "
          "file, and drop its table in the destination unless the table was created again)");
    }
    auto it = relations_.find(table.stream);
    if (it == relations_.end()) return Status::Internal("no relation for " + table.stream);
    const Relation& rel = it->second;
    const StreamInfo* info = nullptr;
    for (const auto& st : cdc_streams_) {
      if (st.name == table.stream) info = &st;
    }
    if (!info) return Status::Internal("no stream info for " + table.stream);
    for (size_t begin = 0; begin < keys.size(); begin += kLookupKeys) {
      const size_t end = std::min(keys.size(), begin + kLookupKeys);
      std::string sql = "SELECT ";
      for (size_t c = 0; c < table.columns.size(); ++c) {
        sql += (c ? ", " : "") + QuoteIdent(table.columns[c]);
      }
      std::string key_list;
      for (size_t k : table.key) {
        key_list += (key_list.empty() ? "" : ", ") + QuoteIdent(table.columns[k]);
      }
      sql += " FROM " + From(rel) + " WHERE (" + key_list + ") IN (";
      std::vector<std::optional<std::string>> params;
      for (size_t i = begin; i < end; ++i) {
        sql += i > begin ? ", (" : "(";
        for (size_t k = 0; k < table.key.size(); ++k) {
          params.push_back(keys[i][k]);
          sql += (k ? ", $" : "$") + std::to_string(params.size()) +
                 "::" + info->columns[table.key[k]].source_type;
        }
        sql += ")";
      }
      sql += ")";
      FERRY_ASSIGN_OR_RETURN(auto r, lookup_->QueryBinary(sql, params));
      std::map<std::vector<std::string>, int> rows;
      for (int row = 0; row < r.rows(); ++row) {
        std::vector<std::string> key;
        for (size_t k : table.key) key.emplace_back(r.Bytes(row, static_cast<int>(k)));
        rows[key] = row;
      }
      for (size_t i = begin; i < end; ++i) {
        auto found = rows.find(keys[i]);
        if (found == rows.end()) continue;
        std::vector<std::optional<std::string>> values;
        for (size_t c = 0; c < table.columns.size(); ++c) {
          if (r.IsNull(found->second, static_cast<int>(c))) {
            values.emplace_back(std::nullopt);
          } else {
            values.emplace_back(std::string(r.Bytes(found->second, static_cast<int>(c))));
          }
        }
        (*out)[i] = std::move(values);
      }
    }
    return Status::OK();
  }

  static void AddError(StreamInfo* info, const std::string& e) {
    info->error += (info->error.empty() ? "" : "; ") + e;
  }

  // The relation of a stream about to be read into batches on `schema`.
  Result<const Relation*> Readable(const StreamInfo& stream, const Schema& schema,
                                   const char* what) const {
    if (const std::string p = stream.Problem(); !p.empty()) return Status::NotSupported(p);
    FERRY_ASSIGN_OR_RETURN(const Relation* rel, Find(stream));
    bool matches =
        schema.fields.size() == stream.columns.size() && rel->wires.size() >= stream.columns.size();
    for (size_t i = 0; matches && i < stream.columns.size(); ++i) {
      matches = TableOrdinal(stream, i) < rel->wires.size();
    }
    if (!matches) {
      return Status::Internal(std::string(what) + ": schema does not match table " +
                              rel->Display());
    }
    return rel;
  }

  Result<const Relation*> Find(const StreamInfo& stream) const {
    auto it = relations_.find(stream.name);
    if (it == relations_.end()) {
      return Status::Internal("stream " + stream.name + " was not discovered by this source");
    }
    return &it->second;
  }

  // Rows per block counted in the first blocks (TID Range Scan): for tables never analyzed.
  Result<double> SampleRowsPerBlock(const Relation& rel, int64_t blocks) {
    int64_t sample = std::min<int64_t>(blocks, kSampleBlocks);
    FERRY_ASSIGN_OR_RETURN(auto r, conn_->Query("SELECT count(*) FROM ONLY " + rel.Qualified() +
                                                " WHERE ctid < " + Tid(sample)));
    return std::max(1.0, static_cast<double>(r.Int64(0, 0)) / static_cast<double>(sample));
  }

  // Columns, types (domains resolved to their base type), primary key, cursor candidates.
  // `readable`: the user may read the table at all (else the table's error says so, and its
  // columns' do not repeat it).
  Status DescribeColumns(Relation* rel, StreamInfo* info, bool readable) {
    FERRY_ASSIGN_OR_RETURN(
        auto cols,
        conn_->Query(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, a.atttypid,"
            "       a.atttypmod, COALESCE(k.pos, 0), has_column_privilege($1::oid, a.attnum, "
            "'SELECT')"
            "  FROM pg_attribute a"
            "  LEFT JOIN (SELECT u.attnum, u.pos FROM pg_index x,"
            "             unnest(x.indkey::int2[]) WITH ORDINALITY AS u(attnum, pos)"
            "             WHERE x.indrelid = $1::oid AND x.indisprimary) k ON k.attnum = a.attnum"
            " WHERE a.attrelid = $1::oid AND a.attnum > 0 AND NOT a.attisdropped"
            " ORDER BY a.attnum",
            {std::to_string(rel->oid)}));
    std::vector<std::pair<int, std::string>> pk;
    for (int i = 0; i < cols.rows(); ++i) {
      ColumnInfo c;
      c.name = cols.Text(i, 0);
      c.source_type = cols.Text(i, 1);
      c.nullable = !cols.Bool(i, 2);
      c.pk_position = static_cast<int>(cols.Int64(i, 5));
      FERRY_ASSIGN_OR_RETURN(pg::PgBaseType base, BaseType(static_cast<uint32_t>(cols.Int64(i, 3)),
                                                           static_cast<int32_t>(cols.Int64(i, 4))));
      base.display = c.source_type;
      pg::PgMapping m = pg::MapPgType(base, c.name);
      c.type = m.type;
      c.error = m.error;
      if (readable && !cols.Bool(i, 6) && c.error.empty()) {
        c.error = "user " + conn_->User() + " may not read column " + c.name + " of " +
                  rel->Display() + ": GRANT SELECT (" + QuoteIdent(c.name) + ") ON " +
                  rel->Qualified() + " TO " + QuoteIdent(conn_->User()) +
                  ", or leave the column out (the stream's exclude_columns)";
      }
      rel->wires.push_back(m.wire);
      rel->type_oids.push_back(static_cast<uint32_t>(cols.Int64(i, 3)));
      rel->names.push_back(c.name);
      if (c.pk_position > 0) pk.emplace_back(c.pk_position, c.name);
      if (m.error.empty() && pg::ClassifyCursor(base).candidate) {
        info->cursor_candidates.push_back(c.name);
      }
      rel->bases.push_back(std::move(base));
      info->columns.push_back(std::move(c));
    }
    std::sort(pk.begin(), pk.end());
    for (auto& [pos, name] : pk) info->primary_key.push_back(name);
    rel->primary_key = info->primary_key;
    return Status::OK();
  }

  // Follows domains down to their base type; the first type modifier on the way applies.
  Result<pg::PgBaseType> BaseType(uint32_t oid, int32_t typmod) {
    pg::PgBaseType t;
    t.typmod = typmod;
    for (int depth = 0; depth < 32; ++depth) {
      auto it = types_.find(oid);
      if (it == types_.end()) {
        FERRY_ASSIGN_OR_RETURN(auto r, conn_->Query("SELECT typtype, typcategory, typbasetype, "
                                                    "typtypmod, typelem FROM pg_type WHERE oid = "
                                                    "$1::oid",
                                                    {std::to_string(oid)}));
        if (r.rows() != 1) return Status::NotFound("type " + std::to_string(oid) + " vanished");
        TypeRow row{r.Text(0, 0)[0], r.Text(0, 1)[0], static_cast<uint32_t>(r.Int64(0, 2)),
                    static_cast<int32_t>(r.Int64(0, 3)), static_cast<uint32_t>(r.Int64(0, 4))};
        it = types_.emplace(oid, row).first;
      }
      const TypeRow& row = it->second;
      if (row.typtype != 'd') {
        t.oid = oid;
        t.typtype = row.typtype;
        t.typcategory = row.typcategory;
        if (row.typcategory == 'A' && row.typelem != 0 && depth < 31) {
          // An array's modifier is its element's (numeric(10,2)[]).
          FERRY_ASSIGN_OR_RETURN(pg::PgBaseType e, BaseType(row.typelem, t.typmod));
          t.element = std::make_shared<const pg::PgBaseType>(std::move(e));
        }
        return t;
      }
      if (t.typmod < 0) t.typmod = row.typtypmod;
      oid = row.typbasetype;
    }
    return Status::NotSupported("type " + std::to_string(oid) + ": domains nested too deep");
  }

  struct TypeRow {
    char typtype;
    char typcategory;
    uint32_t typbasetype;
    int32_t typtypmod;
    uint32_t typelem;
  };

  std::unique_ptr<PgConnection> conn_;
  std::vector<std::string> schemas_;
  std::map<std::string, Relation> relations_;  // by stream name
  std::map<uint32_t, TypeRow> types_;
  bool in_snapshot_ = false;
  std::string snapshot_id_;
  pg::Lsn snapshot_lsn_ = 0;  // where the snapshot stands in the log (SnapshotLogPosition)

  CdcOptions cdc_;
  bool server_checked_ = false;
  std::vector<StreamInfo> cdc_streams_;  // registered by PrepareChangeCapture
  bool slot_ready_ = false;
  pg::Lsn slot_start_ = 0;
  std::unique_ptr<PgConnection> repl_;    // the replication session
  bool streaming_ = false;                // repl_ is in START_REPLICATION
  std::unique_ptr<PgConnection> lookup_;  // reads rows for unchanged TOASTed values
  std::unique_ptr<Channel<std::vector<StreamItem>>> items_;
  std::thread reader_;
  std::atomic<bool> stop_reader_{false};
  std::atomic<pg::Lsn> confirmed_{0};  // ConfirmSharedLog's position, for the reader thread
};

std::string TrimSpaces(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

}  // namespace

Result<std::unique_ptr<Source>> OpenPostgresSource(config::SourceConfig& cfg) {
  FERRY_ASSIGN_OR_RETURN(std::string dsn, cfg.options.TakeString("dsn"));
  std::vector<std::string> schemas;
  if (auto list = cfg.options.TakeOptionalString("schemas")) {
    std::string item;
    for (size_t i = 0; i <= list->size(); ++i) {
      if (i == list->size() || (*list)[i] == ',') {
        item = TrimSpaces(item);
        if (!item.empty()) schemas.push_back(item);
        item.clear();
      } else {
        item += (*list)[i];
      }
    }
  }
  CdcOptions cdc;
  cdc.dsn = dsn;
  std::string fallback;
  for (char c : cfg.pipeline) {
    fallback += std::isalnum(static_cast<unsigned char>(c))
                    ? static_cast<char>(std::tolower(static_cast<unsigned char>(c)))
                    : '_';
  }
  fallback = ("ferry_" + fallback).substr(0, 63);
  for (const char* key : {"slot", "publication"}) {
    std::string name = cfg.options.TakeOptionalString(key).value_or(fallback);
    static const std::regex kSlotName("[a-z0-9_]{1,63}");
    if (!std::regex_match(name, kSlotName)) {
      return Status::InvalidArgument(cfg.options.Where(key) + ": " + key + " name '" + name +
                                     "' must be 1-63 lower-case letters, digits or '_'");
    }
    (std::string(key) == "slot" ? cdc.slot : cdc.publication) = name;
  }
  std::string truncate = cfg.options.TakeOptionalString("truncate").value_or("fail");
  if (truncate != "fail" && truncate != "ignore") {
    return Status::InvalidArgument(cfg.options.Where("truncate") + ": truncate is '" + truncate +
                                   "'; it is one of: fail (stop, the default), ignore (keep the "
                                   "destination's rows)");
  }
  cdc.ignore_truncate = truncate == "ignore";
  cdc.heartbeat_statement = cfg.options.TakeOptionalString("heartbeat_statement").value_or("");
  FERRY_RETURN_IF_ERROR(cfg.options.CheckAllUsed(
      {"dsn", "schemas", "slot", "publication", "truncate", "heartbeat_statement"}));
  // "public.orders" and "orders" name the same stream; streams are named without "public.".
  for (auto& sc : cfg.streams) {
    if (sc.name.rfind("public.", 0) == 0) sc.name = sc.name.substr(7);
  }
  FERRY_ASSIGN_OR_RETURN(auto conn, pg::PgConnection::Connect(dsn));
  return std::unique_ptr<Source>(
      new PostgresSource(std::move(conn), std::move(schemas), std::move(cdc)));
}

}  // namespace ferry::source
