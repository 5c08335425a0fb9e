#include "ferry/engine/tasks.h"

#include <algorithm>

namespace ferry::engine {
namespace {

// What the two sources' versions of a merged table's stream differ in, or "" when they agree.
std::string SchemaDifference(const Schema& a, const Schema& b) {
  if (a.fields.size() != b.fields.size()) {
    return std::to_string(a.fields.size()) + " columns against " + std::to_string(b.fields.size());
  }
  for (size_t i = 0; i < a.fields.size(); ++i) {
    const Field& x = a.fields[i];
    const Field& y = b.fields[i];
    if (x.name != y.name)
      return "column " + std::to_string(i + 1) + " is " + x.name + " / " + y.name;
    if (!x.type.SameShape(y.type)) {
      return "column " + x.name + " is " + x.type.ToIceberg() + " / " + y.type.ToIceberg();
    }
  }
  if (a.identifier_field_ids != b.identifier_field_ids) return "the primary keys differ";
  return "";
}

}  // namespace

std::string StateNamespace(const config::SourceConfig& sc, const source::StreamInfo& info) {
  return sc.name.empty() ? info.ns : sc.name + "/" + info.ns;
}

Status CheckSameTable(const std::string& table, const config::SourceConfig& sa,
                      const source::StreamInfo& a, const Schema& schema_a,
                      const config::SourceConfig& sb, const source::StreamInfo& b,
                      const Schema& schema_b) {
  const std::string la = SourceLabel(sa, a.name), lb = SourceLabel(sb, b.name);
  const config::SyncMode ma = StreamSettings(sa, a.name).mode;
  const config::SyncMode mb = StreamSettings(sb, b.name).mode;
  if (ma != mb) {
    return Status::InvalidArgument("table " + table + " merges " + la + " (" +
                                   std::string(config::SyncModeName(ma)) + ") and " + lb + " (" +
                                   std::string(config::SyncModeName(mb)) +
                                   "); the streams of a merged table need the same mode");
  }
  std::string diff = SchemaDifference(schema_a, schema_b);
  if (!diff.empty()) {
    return Status::InvalidArgument("table " + table + " merges " + la + " and " + lb +
                                   ", whose columns differ: " + diff +
                                   "; the merged streams need the same columns and key");
  }
  return Status::OK();
}

Status CheckDistinctTables(const std::string& table, const std::string& a, const std::string& b,
                           const std::string& where) {
  if (a == b) return Status::OK();
  return Status::InvalidArgument(
      "tables " + a + " and " + b + " would both be written to " + table + " in " + where +
      "; name them apart (the destination's name template, a stream's table:, a route)");
}

Result<std::unique_ptr<Batch>> Transformed(const StreamTask& t, Batch& in, bool deletes,
                                           Batch* removed) {
  auto out = std::make_unique<Batch>(t.out->schema());
  if (!t.transform) {
    std::swap(*out, in);
    return out;
  }
  Batch none(t.out->schema());
  FERRY_RETURN_IF_ERROR(t.transform->Apply(in, /*keyed=*/removed != nullptr, deletes,
                                           t.out->schema(), out.get(),
                                           removed != nullptr ? removed : &none));
  return out;
}

bool Forward(StreamTask* t, Batch& b, bool deletes, const SyncOptions& opts, Status* error) {
  if (opts.stop && opts.stop->requested()) return false;
  CountRows(t, b);
  Batch removed(t->out->schema());
  auto owned = Transformed(*t, b, deletes, t->keyed() ? &removed : nullptr);
  if (!owned.ok()) {
    *error = owned.status();
    return false;
  }
  // Soft deletes arrive as the deleted rows, marked, to upsert.
  const bool soft = deletes && t->transform && t->transform->soft_deletes();
  if ((*owned)->num_rows() > 0 &&
      !t->edge->Send(graph::Message::Data(std::move(*owned), deletes && !soft))) {
    return false;
  }
  if (removed.num_rows() == 0) return true;
  auto gone = std::make_unique<Batch>(t->out->schema());
  std::swap(*gone, removed);
  return t->edge->Send(graph::Message::Data(std::move(gone), /*deletes=*/true));
}

Result<std::vector<std::unique_ptr<SourceRun>>> OpenSources(config::PipelineConfig& cfg,
                                                            bool prepare_capture) {
  std::vector<std::unique_ptr<SourceRun>> out;
  for (config::SourceConfig& sc : cfg.sources) {
    auto run = std::make_unique<SourceRun>();
    run->cfg = &sc;
    FERRY_ASSIGN_OR_RETURN(OpenedSource opened, OpenSelected(sc));
    run->src = std::move(opened.src);
    run->streams = std::move(opened.streams);
    for (auto& info : run->streams) {
      config::StreamConfig settings = StreamSettings(sc, info.name);
      FERRY_RETURN_IF_ERROR(InSource(sc, ApplyKeyOverride(settings, &info)));
      FERRY_ASSIGN_OR_RETURN(auto transform, TransformOf(sc, settings, info));
      const bool cdc =
          settings.mode == config::SyncMode::kCdc || settings.mode == config::SyncMode::kCdcOnly;
      // Columns that cannot be read (types without a mapping, no privilege) matter only when
      // the stream reads them; a change log decoded whole (MySQL's) reads every column.
      const bool whole_rows =
          cdc && run->src->SharedChangeLog() && !run->src->SharedLogSelectsColumns();
      const source::StreamInfo& read = transform && !whole_rows ? transform->read_info() : info;
      if (const std::string problem = read.Problem(); !problem.empty()) {
        return InSource(sc, Status::NotSupported(
                                "table " + info.name + ": " + problem +
                                (transform && whole_rows
                                     ? " (this source's change log is decoded whole: leaving a "
                                       "column out does not spare it)"
                                     : "")));
      }
      run->transforms.push_back(std::move(transform));
      run->destinations.push_back(DestinationName(sc, settings, info));
      if (cdc && settings.soft_deletes) {
        FERRY_RETURN_IF_ERROR(InSource(sc, run->src->CheckDeleteImages(info)));
      }
      if (prepare_capture && cdc) {
        FERRY_RETURN_IF_ERROR(InSource(sc, run->src->PrepareChangeCapture(info)));
      }
    }
    out.push_back(std::move(run));
  }
  return out;
}

}  // namespace ferry::engine
