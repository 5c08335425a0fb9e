#include "ferry/source/postgres/postgres_source.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include "ferry/base/fault.h"
#include "ferry/base/log.h"
#include "ferry/source/postgres/copy_binary.h"
#include "ferry/source/postgres/pg_conn.h"
#include "ferry/source/postgres/pg_types.h"

namespace ferry::source {
namespace {

using pg::CopyBinaryDecoder;
using pg::CopyField;
using pg::PgConnection;
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
  std::vector<pg::PgBaseType> bases;  // per column, domains resolved
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

class PostgresSource final : public Source {
 public:
  PostgresSource(std::unique_ptr<PgConnection> conn, std::vector<std::string> schemas)
      : conn_(std::move(conn)), schemas_(std::move(schemas)) {}

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
            "       has_schema_privilege(n.oid, 'USAGE') AND has_table_privilege(c.oid, 'SELECT'),"
            "       CASE WHEN c.relkind IN ('r','m') THEN pg_relation_size(c.oid) /"
            "            current_setting('block_size')::int8 ELSE 0 END"
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
      FERRY_RETURN_IF_ERROR(DescribeColumns(&rel, &info));
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
          } else {
            info.chunking = "ctid block ranges";
          }
          if (reltuples >= 0) {
            info.estimated_rows = static_cast<int64_t>(reltuples);
          } else if (blocks > 0 && rels.Bool(i, 6)) {
            FERRY_ASSIGN_OR_RETURN(double per_block, SampleRowsPerBlock(rel, blocks));
            info.estimated_rows = static_cast<int64_t>(per_block * static_cast<double>(blocks));
          }
          break;
        case 'p': {
          info.chunking = "whole table (partitioned: every partition in one chunk)";
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
    FERRY_RETURN_IF_ERROR(conn_->Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"));
    in_snapshot_ = true;
    // The first statement takes the snapshot; exporting it lets later parallel readers share it
    // (not possible on a standby, where the transaction still gives one consistent point).
    FERRY_ASSIGN_OR_RETURN(
        auto r,
        conn_->Query(
            "SELECT CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_export_snapshot() END"));
    snapshot_id_ = r.IsNull(0, 0) ? "" : r.Text(0, 0);
    FERRY_LOG(kDebug) << "PostgreSQL snapshot "
                      << (snapshot_id_.empty() ? "(not exported)" : snapshot_id_);
    return Status::OK();
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

  Result<ChunkPlan> PlanChunks(const StreamInfo& stream, int64_t chunk_rows) override {
    FERRY_ASSIGN_OR_RETURN(const Relation* rel, Find(stream));
    if (!rel->Heap()) return ChunkPlan{};
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
      ChunkPlan plan;
      plan.key = *key;
      plan.first = bounds[0];
      plan.step = std::max<int64_t>(chunk_rows, 1);
      unsigned __int128 span =
          static_cast<unsigned __int128>(static_cast<__int128>(bounds[1]) - bounds[0]);
      plan.count = static_cast<int64_t>(span / static_cast<unsigned __int128>(plan.step)) + 1;
      return plan;
    }
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

  Status ReadChunk(const StreamInfo& stream, const Chunk& chunk,
                   std::shared_ptr<const Schema> schema, size_t batch_rows,
                   const std::function<bool(Batch&)>& emit) override {
    if (!stream.error.empty()) return Status::NotSupported(stream.error);
    FERRY_ASSIGN_OR_RETURN(const Relation* rel, Find(stream));
    if (schema->fields.size() != stream.columns.size() ||
        rel->wires.size() != stream.columns.size()) {
      return Status::Internal("ReadChunk: schema does not match table " + rel->Display());
    }
    std::vector<CopyField> fields;
    std::string sql = "COPY (SELECT " + SelectList(*rel, stream, &fields);
    sql += " FROM " + From(*rel);
    if (rel->Heap() && !chunk.key.empty() && chunk.key != "ctid") {
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

  Result<nlohmann::json> MaxCursor(const StreamInfo& stream, const std::string& cursor) override {
    if (!stream.error.empty()) return Status::NotSupported(stream.error);
    FERRY_ASSIGN_OR_RETURN(const Relation* rel, Find(stream));
    FERRY_ASSIGN_OR_RETURN(CursorColumn cc, CheckCursor(stream, *rel, cursor));
    // ORDER BY ... DESC LIMIT 1 rather than max(): every orderable type has a b-tree order (uuid
    // has no max() before PostgreSQL 18), an index on the column answers it, and it is the very
    // order the window's `>` and `<=` use (same operator class, same collation). The text cast
    // is outside: an ORDER BY naming an output column would sort the text.
    const std::string c = QuoteIdent(cursor);
    FERRY_ASSIGN_OR_RETURN(
        auto r,
        conn_->Query("SELECT m::text FROM (SELECT " + c + " AS m FROM " + From(*rel) + " WHERE " +
                     c + " IS NOT NULL ORDER BY " + c + " DESC LIMIT 1) AS top"));
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
                         const nlohmann::json& lower, const nlohmann::json& upper,
                         std::shared_ptr<const Schema> schema, size_t batch_rows,
                         const std::function<bool(Batch&)>& emit) override {
    if (!stream.error.empty()) return Status::NotSupported(stream.error);
    FERRY_ASSIGN_OR_RETURN(const Relation* rel, Find(stream));
    if (schema->fields.size() != stream.columns.size() ||
        rel->wires.size() != stream.columns.size()) {
      return Status::Internal("ReadCursorRange: schema does not match table " + rel->Display());
    }
    FERRY_ASSIGN_OR_RETURN(CursorColumn cc, CheckCursor(stream, *rel, cursor));
    if (upper.is_null()) return Status::Internal("ReadCursorRange without an upper bound");
    FERRY_ASSIGN_OR_RETURN(std::string hi, CursorLiteral(*rel, cursor, cc, upper));
    std::vector<CopyField> fields;
    std::string sql = "COPY (SELECT " + SelectList(*rel, stream, &fields);
    const std::string c = QuoteIdent(cursor);
    // A row whose cursor is NULL satisfies neither comparison: it is never read.
    sql += " FROM " + From(*rel) + " WHERE " + c + " <= " + hi;
    if (!lower.is_null()) {
      FERRY_ASSIGN_OR_RETURN(std::string lo, CursorLiteral(*rel, cursor, cc, lower));
      sql += " AND " + c + " > " + lo;
    }
    sql += " ORDER BY " + c + ") TO STDOUT (FORMAT binary)";
    return CopyInto(*rel, sql, std::move(fields), std::move(schema), batch_rows, emit);
  }

  std::string Describe() const override {
    return conn_->Describe() +
           " (full refresh and incremental windows: every table read in one REPEATABLE READ "
           "transaction, a consistent point)";
  }

 private:
  struct CursorColumn {
    size_t index = 0;
    pg::CursorSupport support;
  };

  // The columns of a COPY (ctid first for heap relations, so that a value error names its row).
  static std::string SelectList(const Relation& rel, const StreamInfo& stream,
                                std::vector<CopyField>* fields) {
    std::string sql;
    if (rel.Heap()) {
      sql += "ctid";
      fields->push_back(CopyField{"ctid", PgWire::kTid, -1});
    }
    for (size_t i = 0; i < stream.columns.size(); ++i) {
      sql += (fields->empty() ? "" : ", ") + QuoteIdent(stream.columns[i].name);
      fields->push_back(CopyField{stream.columns[i].name, rel.wires[i], static_cast<int>(i)});
    }
    return sql;
  }

  // ONLY: rows of inheritance children are their own streams (and their ctids overlap).
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
    for (size_t i = 0; i < stream.columns.size() && i < rel.bases.size(); ++i) {
      if (stream.columns[i].name != cursor) continue;
      CursorColumn cc{i, pg::ClassifyCursor(rel.bases[i])};
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

  // Streams a COPY through the decoder into batches of at most about `batch_rows` rows.
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
      if (batch.num_rows() >= batch_rows) {
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

  static void AddError(StreamInfo* info, const std::string& e) {
    info->error += (info->error.empty() ? "" : "; ") + e;
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
  Status DescribeColumns(Relation* rel, StreamInfo* info) {
    FERRY_ASSIGN_OR_RETURN(
        auto cols,
        conn_->Query(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, a.atttypid,"
            "       a.atttypmod, COALESCE(k.pos, 0)"
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
      if (!m.error.empty()) AddError(info, m.error);
      rel->wires.push_back(m.wire);
      if (c.pk_position > 0) pk.emplace_back(c.pk_position, c.name);
      if (m.error.empty() && pg::ClassifyCursor(base).candidate) {
        info->cursor_candidates.push_back(c.name);
      }
      rel->bases.push_back(std::move(base));
      info->columns.push_back(std::move(c));
    }
    std::sort(pk.begin(), pk.end());
    for (auto& [pos, name] : pk) info->primary_key.push_back(name);
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
                                                    "typtypmod FROM pg_type WHERE oid = $1::oid",
                                                    {std::to_string(oid)}));
        if (r.rows() != 1) return Status::NotFound("type " + std::to_string(oid) + " vanished");
        TypeRow row{r.Text(0, 0)[0], r.Text(0, 1)[0], static_cast<uint32_t>(r.Int64(0, 2)),
                    static_cast<int32_t>(r.Int64(0, 3))};
        it = types_.emplace(oid, row).first;
      }
      const TypeRow& row = it->second;
      if (row.typtype != 'd') {
        t.oid = oid;
        t.typtype = row.typtype;
        t.typcategory = row.typcategory;
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
  };

  std::unique_ptr<PgConnection> conn_;
  std::vector<std::string> schemas_;
  std::map<std::string, Relation> relations_;  // by stream name
  std::map<uint32_t, TypeRow> types_;
  bool in_snapshot_ = false;
  std::string snapshot_id_;
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
  FERRY_RETURN_IF_ERROR(cfg.options.CheckAllUsed({"dsn", "schemas"}));
  // "public.orders" and "orders" name the same stream; streams are named without "public.".
  for (auto& sc : cfg.streams) {
    if (sc.name.rfind("public.", 0) == 0) sc.name = sc.name.substr(7);
  }
  FERRY_ASSIGN_OR_RETURN(auto conn, pg::PgConnection::Connect(dsn));
  return std::unique_ptr<Source>(new PostgresSource(std::move(conn), std::move(schemas)));
}

}  // namespace ferry::source
