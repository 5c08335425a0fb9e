#include "ferry/source/source.h"

#include <algorithm>

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

std::string StreamInfo::Problem() const {
  std::string out = error;
  for (const auto& c : columns) {
    if (!c.error.empty()) out += (out.empty() ? "" : "; ") + c.error;
  }
  return out;
}

std::string Chunk::Id(const std::string& stream) const {
  if (!lo_key.is_null() || !hi_key.is_null()) {
    return stream + "[" + (lo_key.is_null() ? "" : lo_key.dump()) + "," +
           (hi_key.is_null() ? "" : hi_key.dump()) + ")";
  }
  return stream + "[" + (lo ? std::to_string(*lo) : "") + "," + (hi ? std::to_string(*hi) : "") +
         ")";
}

Chunk ChunkPlan::At(int64_t i) const {
  Chunk c;
  c.key = key;
  if (!key_bounds.empty()) {
    const auto n = static_cast<int64_t>(key_bounds.size());
    if (i > 0) c.lo_key = key_bounds[static_cast<size_t>(std::min(i, n) - 1)];
    if (i < n) c.hi_key = key_bounds[static_cast<size_t>(std::max<int64_t>(i, 0))];
    return c;
  }
  if (!bounds.empty()) {
    const auto n = static_cast<int64_t>(bounds.size());
    if (i > 0) c.lo = bounds[static_cast<size_t>(std::min(i, n) - 1)];
    if (i < n) c.hi = bounds[static_cast<size_t>(std::max<int64_t>(i, 0))];
    return c;
  }
  if (!first || count <= 1) return c;
  if (i > 0) c.lo = *first + i * step;
  if (i + 1 < count) c.hi = *first + (i + 1) * step;
  return c;
}

std::optional<ChunkPlan> GridPlan(int64_t lo, int64_t hi, int64_t rows, int64_t chunk_rows) {
  chunk_rows = std::max<int64_t>(chunk_rows, 1);
  const auto span = static_cast<unsigned __int128>(static_cast<__int128>(hi) - lo);
  const unsigned __int128 grid = span / static_cast<unsigned __int128>(chunk_rows) + 1;
  const auto needed = static_cast<unsigned __int128>(std::max<int64_t>(rows, 0) / chunk_rows + 1);
  if (grid > 2 * needed + 1) return std::nullopt;
  ChunkPlan plan;
  plan.first = lo;
  plan.step = chunk_rows;
  plan.count = static_cast<int64_t>(grid);
  plan.rows = rows;
  return plan;
}

int64_t BoundaryEvery(double weight, int64_t chunk_rows) {
  const double every =
      static_cast<double>(std::max<int64_t>(chunk_rows, 1)) / std::max(weight, 1e-9);
  return std::max<int64_t>(1, static_cast<int64_t>(every + 0.5));
}

ChunkPlan BoundariesPlan(const std::vector<int64_t>& keys, double weight, int64_t chunk_rows) {
  ChunkPlan plan;
  const double every =
      static_cast<double>(std::max<int64_t>(chunk_rows, 1)) / std::max(weight, 1e-9);
  // The key that starts each chunk after the first: every `every`-th key of the sample.
  for (double at = every; at < static_cast<double>(keys.size()); at += every) {
    const int64_t k = keys[static_cast<size_t>(at)];
    if (plan.bounds.empty() || k > plan.bounds.back()) plan.bounds.push_back(k);
  }
  plan.count = static_cast<int64_t>(plan.bounds.size()) + 1;
  if (plan.count > 1) plan.first = plan.bounds.front();
  return plan;
}

Result<std::string> Source::StalePlan(const StreamInfo&, const ChunkPlan&) { return std::string(); }

Result<std::string> Source::TableChanged(const StreamInfo& stream, const std::string& held) {
  if (held.empty() || stream.table_id.empty() || held == stream.table_id) return std::string();
  return "table " + stream.name +
         " was dropped and created again on the source (its rows are of table " + held +
         "; the source's is " + stream.table_id + " now)";
}

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
Result<Position> Source::ChangeLogEnd(const StreamInfo& stream) { return NoChangeLog(stream); }
Status Source::ReadChanges(const StreamInfo& stream, Position, Position,
                           std::shared_ptr<const Schema>, size_t,
                           const std::function<bool(Batch&, bool)>&) {
  return NoChangeLog(stream);
}
Status Source::AcknowledgeChanges(const StreamInfo& stream, Position) {
  return NoChangeLog(stream);
}
Status Source::CheckChangeCapture(const StreamInfo&) { return Status::OK(); }
Status Source::CheckDeleteImages(const StreamInfo&) { return Status::OK(); }
Status Source::CheckChangesRetained(const StreamInfo&, Position) { return Status::OK(); }
Result<Source::SharedRead> Source::ReadSharedChanges(
    const std::vector<SharedStream>&, const SharedReadOptions&,
    const std::function<bool(size_t, Batch&, bool)>&,
    const std::function<bool(Position, const std::vector<std::string>&)>&) {
  return Status::Internal("ReadSharedChanges on a source without a shared change log");
}
void Source::ConfirmSharedLog(Position) {}
Result<Source::PendingChanges> Source::SharedLogPending(const StreamInfo&, Position) {
  PendingChanges p;
  p.detail = "the source cannot look into its change log";
  return p;
}

Status Source::AcknowledgeSharedLog(Position) {
  return Status::Internal("AcknowledgeSharedLog on a source without a shared change log");
}

Result<std::unique_ptr<Source>> OpenSource(config::SourceConfig& cfg) {
  std::string known;
  for (const SourceType& t : SourceTypes()) {
    if (cfg.type == t.name) return t.open(cfg);
    known += (known.empty() ? "" : ", ") + std::string(t.name);
  }
  return Status::InvalidArgument("source type '" + cfg.type +
                                 "' is not known; this build reads: " + known);
}

}  // namespace ferry::source
