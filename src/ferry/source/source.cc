#include "ferry/source/source.h"

#include "ferry/source/postgres/postgres_source.h"
#include "ferry/source/sqlite/sqlite_source.h"

namespace ferry::source {

Schema StreamInfo::ToSchema() const {
  Schema s;
  bool keys_required = !primary_key.empty();
  for (const auto& c : columns) {
    if (c.pk_position > 0 && c.nullable) keys_required = false;
  }
  int32_t id = 0;
  std::vector<std::pair<int, int32_t>> keys;
  for (const auto& c : columns) {
    Field f;
    f.id = ++id;
    f.name = c.name;
    f.type = c.type;
    f.required = !c.nullable;
    s.fields.push_back(f);
    if (c.pk_position > 0) keys.emplace_back(c.pk_position, f.id);
    // Iceberg identifier fields are primitive: a key with a list column has none.
    if (c.pk_position > 0 && c.type.is_list()) keys_required = false;
  }
  // List elements take ids after the columns' (Table::AssignFieldIds keeps a table's own ids).
  for (auto& f : s.fields) {
    if (f.type.is_list()) f.type = f.type.WithElementId(++id);
  }
  if (keys_required) {
    std::sort(keys.begin(), keys.end());
    for (auto& [pos, fid] : keys) s.identifier_field_ids.push_back(fid);
  }
  return s;
}

std::string Chunk::Id(const std::string& stream) const {
  return stream + "[" + (lo ? std::to_string(*lo) : "") + "," + (hi ? std::to_string(*hi) : "") +
         ")";
}

Chunk ChunkPlan::At(int64_t i) const {
  Chunk c;
  c.key = key;
  if (!first || count <= 1) return c;
  if (i > 0) c.lo = *first + i * step;
  if (i + 1 < count) c.hi = *first + (i + 1) * step;
  return c;
}

Result<std::string> Source::StalePlan(const StreamInfo&, const ChunkPlan&) { return std::string(); }

Result<std::unique_ptr<Source>> Source::OpenSnapshotReader() { return std::unique_ptr<Source>(); }

Result<nlohmann::json> Source::MaxCursor(const StreamInfo& stream, const std::string&,
                                         const nlohmann::json&) {
  return Status::InvalidArgument("stream " + stream.name +
                                 ": this source does not offer incremental mode; use full_refresh");
}

Status Source::ReadCursorRange(const StreamInfo& stream, const std::string&, const CursorRange&,
                               std::shared_ptr<const Schema>, size_t,
                               const std::function<bool(Batch&)>&) {
  return Status::InvalidArgument("stream " + stream.name +
                                 ": this source does not offer incremental mode; use full_refresh");
}

namespace {
Status NoChangeLog(const StreamInfo& stream) {
  return Status::InvalidArgument("stream " + stream.name +
                                 ": this source does not offer cdc with per-stream change logs");
}
}  // namespace

Status Source::PrepareChangeCapture(const StreamInfo& stream) { return NoChangeLog(stream); }
Result<int64_t> Source::ChangeLogEnd(const StreamInfo& stream) { return NoChangeLog(stream); }
Status Source::ReadChanges(const StreamInfo& stream, int64_t, int64_t,
                           std::shared_ptr<const Schema>, size_t,
                           const std::function<bool(Batch&, bool)>&) {
  return NoChangeLog(stream);
}
Status Source::AcknowledgeChanges(const StreamInfo& stream, int64_t) { return NoChangeLog(stream); }
Status Source::CheckChangeCapture(const StreamInfo&) { return Status::OK(); }
Result<Source::SharedRead> Source::ReadSharedChanges(
    const std::vector<SharedStream>&, const SharedReadOptions&,
    const std::function<bool(size_t, Batch&, bool)>&,
    const std::function<bool(int64_t, const std::vector<std::string>&)>&) {
  return Status::Internal("ReadSharedChanges on a source without a shared change log");
}
void Source::ConfirmSharedLog(int64_t) {}
Result<Source::PendingChanges> Source::SharedLogPending(const StreamInfo&, int64_t) {
  PendingChanges p;
  p.detail = "the source cannot look into its change log";
  return p;
}

Status Source::AcknowledgeSharedLog(int64_t) {
  return Status::Internal("AcknowledgeSharedLog on a source without a shared change log");
}

Result<std::unique_ptr<Source>> OpenSource(config::SourceConfig& cfg) {
  if (cfg.type == "sqlite") return OpenSqliteSource(cfg);
  if (cfg.type == "postgres") return OpenPostgresSource(cfg);
  return Status::InvalidArgument("source type '" + cfg.type +
                                 "' is not known; this build reads: sqlite, postgres");
}

}  // namespace ferry::source
